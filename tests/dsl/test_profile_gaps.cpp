// The device-gap report (dsl/profile_gaps.h) on hand-made profiles: idle intervals between
// activities charged to the host event that launched the activity ending them, overlapping
// streams counted once, other devices and time outside the window ignored, the gaps by length,
// the text form, and errors for a bad window or device.
#include <boost/test/unit_test.hpp>

#include "dsl/error.h"
#include "dsl/profile_gaps.h"

using namespace kiln;

namespace {

ProfileEvent host(uint64_t id, const std::string& category, const std::string& name, double start, double duration) {
  ProfileEvent e;
  e.id = id;
  e.category = category;
  e.name = name;
  e.start_us = start;
  e.duration_us = duration;
  return e;
}

ProfileEvent activity(int device, int stream, uint64_t launched_by, double start, double duration) {
  ProfileEvent e;
  e.category = "kernel";
  e.name = "k";
  e.device = device;
  e.thread = stream;
  e.launched_by = launched_by;
  e.start_us = start;
  e.duration_us = duration;
  return e;
}

const DeviceGapGroup* group(const DeviceGapReport& r, const std::string& name) {
  for (const DeviceGapGroup& g : r.groups)
    if (g.name == name) return &g;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_CASE(idle_time_is_charged_to_the_launch_the_device_waited_for) {
  std::vector<ProfileEvent> ev = {
      host(1, "region", "pipeline A", 0, 100), host(2, "eager_step", "matmul B", 0, 100),
      activity(0, 7, 1, 10, 10),    // idle 0..10, charged to A
      activity(0, 7, 2, 25, 5),     // idle 20..25 (5 us), charged to B
      activity(0, 7, 1, 30, 10),    // right after: no gap
      activity(0, 8, 2, 35, 15),    // another stream, overlapping: busy until 50
      activity(0, 7, 0, 110, 2),    // after the window
      activity(1, 7, 1, 52, 100),   // another device
      activity(0, 7, 99, 130, 10),  // after the window, unknown launcher
  };
  DeviceGapReport r = device_gaps(ev, 0, 0, 100);
  BOOST_TEST(r.window_us == 100);
  BOOST_TEST(r.activities == 4);
  BOOST_TEST(r.busy_us == 35);  // 10 + 5 + 10 + the 10 us of stream 8 past 40
  BOOST_TEST(r.idle_us == 65);  // 10 + 5 + the 50 us after 50
  BOOST_TEST(r.busy_us + r.idle_us == r.window_us);
  BOOST_TEST(r.gaps == 3);
  const DeviceGapGroup* a = group(r, "pipeline A");
  const DeviceGapGroup* b = group(r, "matmul B");
  const DeviceGapGroup* after = group(r, "(after the last activity)");
  BOOST_TEST_REQUIRE((a && b && after));
  BOOST_TEST(a->category == "region");
  BOOST_TEST(a->idle_us == 10);
  BOOST_TEST(b->idle_us == 5);
  BOOST_TEST(b->gaps == 1);
  BOOST_TEST(after->idle_us == 50);
  BOOST_TEST(r.groups.front().name == "(after the last activity)");  // the largest first
  BOOST_TEST((r.short_gaps == 0 && r.medium_gaps == 2 && r.long_gaps == 1));
  BOOST_TEST(r.medium_us == 15);
  BOOST_TEST(r.long_us == 50);
}

BOOST_AUTO_TEST_CASE(activity_across_the_window_edges_is_clipped_and_unknown_launchers_are_named) {
  std::vector<ProfileEvent> ev = {
      activity(0, 7, 0, -5, 8),   // runs into the window: busy 0..3
      activity(0, 7, 42, 4, 1),   // launcher not among the events: idle 3..4 (1 us, short)
      activity(0, 7, 0, 8, 20),   // runs past the window's end at 20
  };
  DeviceGapReport r = device_gaps(ev, 0, 0, 20);
  BOOST_TEST(r.busy_us == 16);  // 3 + 1 + 12
  BOOST_TEST(r.idle_us == 4);   // 3..4 and 5..8
  BOOST_TEST(r.short_gaps == 2);
  const DeviceGapGroup* none = group(r, "(no host event recorded)");
  BOOST_TEST_REQUIRE(none);
  BOOST_TEST(none->gaps == 2);
  BOOST_TEST(none->max_us == 3);
  BOOST_TEST(!group(r, "(after the last activity)"));  // busy to the end
}

BOOST_AUTO_TEST_CASE(the_text_names_the_totals_and_the_launchers) {
  std::vector<ProfileEvent> ev = {host(1, "region", "pipeline A", 0, 100), activity(0, 7, 1, 60, 40)};
  std::string text = format_device_gaps(device_gaps(ev, 0, 0, 100));
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(text.find("busy 0.040 ms (40.0%), idle 0.060 ms (60.0%) in 1 gaps between 1 activities") !=
             std::string::npos);
  BOOST_TEST(text.find("50 us and more 1 (0.060 ms)") != std::string::npos);
  BOOST_TEST(text.find("pipeline A") != std::string::npos);
  // No activity at all: the whole window is idle after the last (absent) activity.
  DeviceGapReport empty = device_gaps({}, 0, 0, 10);
  BOOST_TEST(empty.idle_us == 10);
  BOOST_TEST(empty.activities == 0);
}

BOOST_AUTO_TEST_CASE(a_bad_window_or_device_is_an_error) {
  BOOST_CHECK_THROW(device_gaps({}, 0, 10, 5), Error);
  BOOST_CHECK_THROW(device_gaps({}, -1, 0, 5), Error);
}
