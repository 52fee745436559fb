// Timing on a CUDA device for `kiln bench gpu`: CUDA events between calls issued back to back (no
// host wait between them), the median after warm-up, as bench/torch/bench_torch.py times
// PyTorch; GB/s; and the device-to-device copy bandwidth every memory-bound kernel is compared
// with.
#pragma once
#include <functional>

#include "kiln.h"

namespace kiln::bench {

// Median milliseconds of fn on the device after warm-up: events between consecutive calls, which
// the host issues without waiting, so a call's time is its device time unless issuing it takes
// the host longer.
double device_ms(const std::function<void()>& fn, int warmup = 5, int min_samples = 30, double min_seconds = 0.3);

inline double gbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

// A device-to-device copy (read + write bytes) moving `traffic_bytes` in all, 512 MiB (a 256 MiB
// copy) by default. A kernel that moves tens of MB is also compared with a copy of its own bytes:
// at that size the launch and the tail of the grid take a share of the time that no schedule
// removes.
double copy_gbps(Device d, double traffic_bytes = double(int64_t(512) << 20));

}  // namespace kiln::bench
