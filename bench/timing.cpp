#include "bench/timing.h"

#include <algorithm>

namespace kiln::bench {

Timing time_median(const std::function<void()>& fn, int batch, int warmup, int min_samples,
                   double min_seconds, int max_samples) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> s;
  double start = now_seconds();
  while (int(s.size()) < max_samples &&
         (int(s.size()) < min_samples || now_seconds() - start < min_seconds)) {
    double t0 = now_seconds();
    for (int i = 0; i < batch; ++i) fn();
    s.push_back((now_seconds() - t0) / batch);
  }
  std::sort(s.begin(), s.end());
  return {s[s.size() / 2], s.front(), s.back(), int(s.size())};
}

}  // namespace kiln::bench
