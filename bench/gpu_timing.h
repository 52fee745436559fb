// Timing on a CUDA device for `kiln bench gpu`: CUDA events around each call, the median after
// warm-up (as bench/torch/bench_torch.py times PyTorch), GB/s, and the device-to-device copy
// bandwidth every memory-bound kernel is compared with.
#pragma once
#include <functional>

#include "kiln.h"

namespace kiln::bench {

// Median milliseconds of fn on the device (events around each call), after warm-up.
double device_ms(const std::function<void()>& fn, int warmup = 5, int min_samples = 30, double min_seconds = 0.3);

inline double gbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

// A 256 MiB device-to-device copy (read + write bytes).
double copy_gbps(Device d);

}  // namespace kiln::bench
