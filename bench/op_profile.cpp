#include "bench/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench/timing.h"

namespace kiln::bench {

TensorList OpProfile::call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  if (wait_) wait_();
  double t0 = now_seconds();
  TensorList out = dispatch(def, inputs, attrs);
  if (wait_) wait_();
  Entry& e = entries_[def.name];
  e.calls += 1;
  e.seconds += now_seconds() - t0;
  return out;
}

void OpProfile::print(double total_seconds, size_t max_rows) const { print(entries_, total_seconds, max_rows, "op"); }

void OpProfile::print(const std::map<std::string, Entry>& entries, double total_seconds, size_t max_rows,
                      const char* what) {
  std::vector<std::pair<std::string, Entry>> rows(entries.begin(), entries.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("  %-16s %8s %12s %8s\n", what, "calls", "total (ms)", "share");
  if (rows.size() > max_rows) rows.resize(max_rows);
  for (const auto& [name, e] : rows)
    std::printf("  %-16s %8lld %12.3f %7.1f%%\n", name.c_str(), static_cast<long long>(e.calls), e.seconds * 1e3,
                100 * e.seconds / total_seconds);
}

}  // namespace kiln::bench
