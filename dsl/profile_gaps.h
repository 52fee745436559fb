// Where a device waited: the idle intervals of one device between its kernels, copies and memsets
// inside a window of a profile (dsl/profiler.h), each charged to the host event that launched the
// activity ending it, that is the launch the device was waiting for. Grouped by that host event's
// category and name, the largest idle total first, so a profile of a compiled call names the
// regions and eager steps whose host work leaves the device idle.
//
//   Profiler p({.cuda = true}); ...; p.stop();
//   DeviceGapReport g = device_gaps(p.events(), /*device=*/0, from_us, to_us);
//   std::cout << format_device_gaps(g);
//
// Activity on several streams of the device counts as busy where any of it runs. The idle time
// before the window's first activity is charged to that activity's launcher; the idle time after
// the last one to "(after the last activity)".
#pragma once
#include <string>
#include <vector>

#include "dsl/profiler.h"

namespace kiln {

struct DeviceGapGroup {
  std::string category;  // of the launching host event ("" where none was recorded)
  std::string name;      // the launching host event's name, or "(no host event recorded)"
  int64_t gaps = 0;
  double idle_us = 0, max_us = 0;
};

struct DeviceGapReport {
  double window_us = 0, busy_us = 0, idle_us = 0;
  int64_t activities = 0, gaps = 0;
  // Gaps by length: under 5 us (a launch queued behind the one before), 5 to 50 us, 50 us and more.
  int64_t short_gaps = 0, medium_gaps = 0, long_gaps = 0;
  double short_us = 0, medium_us = 0, long_us = 0;
  std::vector<DeviceGapGroup> groups;  // the largest idle_us first
};

// The idle intervals of `device` inside [from_us, to_us] (profile microseconds).
DeviceGapReport device_gaps(const std::vector<ProfileEvent>& events, int device, double from_us, double to_us);

// The report as text: the totals, the gaps by length, then up to max_rows groups.
std::string format_device_gaps(const DeviceGapReport& report, size_t max_rows = 12);

}  // namespace kiln
