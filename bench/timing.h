// Timing for benchmarks: warm up, then take many samples and report the median, so that the
// noise of a shared machine shows up as spread, not as a biased number.
#pragma once
#include <chrono>
#include <functional>
#include <vector>

namespace kiln::bench {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int samples = 0;
};

// Runs `fn` `warmup` times, then `batch` calls per sample until `min_samples` samples and
// `min_seconds` have passed (at most `max_samples`); times are per call.
Timing time_median(const std::function<void()>& fn, int batch = 1, int warmup = 3, int min_samples = 15,
                   double min_seconds = 0.2, int max_samples = 1000);

}  // namespace kiln::bench
