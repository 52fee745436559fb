#include "dsl/profile_gaps.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include "dsl/error.h"

namespace kiln {

namespace {

constexpr double kShortGapUs = 5, kLongGapUs = 50;
const char* const kNoHostEvent = "(no host event recorded)";
const char* const kAfterLast = "(after the last activity)";

}  // namespace

DeviceGapReport device_gaps(const std::vector<ProfileEvent>& events, int device, double from_us, double to_us) {
  KILN_CHECK(device >= 0, "device_gaps: device must be a CUDA device index, got ", device);
  KILN_CHECK(to_us >= from_us, "device_gaps: the window [", from_us, ", ", to_us, "] ends before it starts");
  std::unordered_map<uint64_t, const ProfileEvent*> host_by_id;
  std::vector<const ProfileEvent*> activity;
  for (const ProfileEvent& e : events) {
    if (e.device < 0 && e.id) host_by_id[e.id] = &e;
    if (e.device == device && e.start_us + e.duration_us > from_us && e.start_us < to_us) activity.push_back(&e);
  }
  std::sort(activity.begin(), activity.end(),
            [](const ProfileEvent* a, const ProfileEvent* b) { return a->start_us < b->start_us; });

  DeviceGapReport r;
  r.window_us = to_us - from_us;
  r.activities = static_cast<int64_t>(activity.size());
  std::map<std::pair<std::string, std::string>, DeviceGapGroup> groups;
  auto charge = [&](double idle, const std::string& category, const std::string& name) {
    if (idle <= 0) return;
    DeviceGapGroup& g = groups[{category, name}];
    g.category = category;
    g.name = name;
    ++g.gaps;
    g.idle_us += idle;
    g.max_us = std::max(g.max_us, idle);
    ++r.gaps;
    r.idle_us += idle;
    if (idle < kShortGapUs) {
      ++r.short_gaps;
      r.short_us += idle;
    } else if (idle < kLongGapUs) {
      ++r.medium_gaps;
      r.medium_us += idle;
    } else {
      ++r.long_gaps;
      r.long_us += idle;
    }
  };
  // Busy until `busy_to`: activity on other streams may overlap, so the idle interval before an
  // activity is what lies between the latest end so far and its start.
  double busy_to = from_us;
  for (const ProfileEvent* e : activity) {
    const double start = std::max(e->start_us, from_us), end = std::min(e->start_us + e->duration_us, to_us);
    if (start > busy_to) {
      auto it = e->launched_by ? host_by_id.find(e->launched_by) : host_by_id.end();
      if (it != host_by_id.end())
        charge(start - busy_to, it->second->category, it->second->name);
      else
        charge(start - busy_to, "", kNoHostEvent);
    }
    if (end > busy_to) {
      r.busy_us += end - std::max(start, busy_to);
      busy_to = end;
    }
  }
  charge(to_us - busy_to, "", kAfterLast);
  for (auto& [key, g] : groups) r.groups.push_back(g);
  std::sort(r.groups.begin(), r.groups.end(),
            [](const DeviceGapGroup& a, const DeviceGapGroup& b) { return a.idle_us > b.idle_us; });
  return r;
}

std::string format_device_gaps(const DeviceGapReport& r, size_t max_rows) {
  auto pct = [&](double us) { return r.window_us > 0 ? 100 * us / r.window_us : 0.0; };
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line,
                "device gaps: %.3f ms window, busy %.3f ms (%.1f%%), idle %.3f ms (%.1f%%) in %lld gaps between %lld "
                "activities\n",
                r.window_us / 1e3, r.busy_us / 1e3, pct(r.busy_us), r.idle_us / 1e3, pct(r.idle_us),
                static_cast<long long>(r.gaps), static_cast<long long>(r.activities));
  os << line;
  std::snprintf(line, sizeof line,
                "  by length: under %.0f us %lld (%.3f ms), %.0f-%.0f us %lld (%.3f ms), %.0f us and more %lld (%.3f ms)\n",
                kShortGapUs, static_cast<long long>(r.short_gaps), r.short_us / 1e3, kShortGapUs, kLongGapUs,
                static_cast<long long>(r.medium_gaps), r.medium_us / 1e3, kLongGapUs,
                static_cast<long long>(r.long_gaps), r.long_us / 1e3);
  os << line;
  if (r.groups.empty()) return os.str();
  std::snprintf(line, sizeof line, "  %-14s %-52s %7s %10s %9s %7s\n", "category", "waited for a launch by", "gaps", "idle ms",
                "max us", "idle %");
  os << line;
  for (size_t i = 0; i < r.groups.size() && i < max_rows; ++i) {
    const DeviceGapGroup& g = r.groups[i];
    std::string name = g.name.size() > 52 ? g.name.substr(0, 49) + "..." : g.name;
    std::snprintf(line, sizeof line, "  %-14s %-52s %7lld %10.3f %9.1f %6.1f%%\n", g.category.c_str(), name.c_str(),
                  static_cast<long long>(g.gaps), g.idle_us / 1e3, g.max_us, pct(g.idle_us));
    os << line;
  }
  if (r.groups.size() > max_rows) os << "  ... " << r.groups.size() - max_rows << " more\n";
  return os.str();
}

}  // namespace kiln
