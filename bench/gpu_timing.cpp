#include "bench/gpu_timing.h"

#include <algorithm>
#include <vector>

#include "bench/timing.h"

namespace kiln::bench {

double device_ms(const std::function<void()>& fn, int warmup, int min_samples, double min_seconds) {
  for (int i = 0; i < warmup; ++i) fn();
  cuda_synchronize();
  // A mark between consecutive calls and one wait at the end: the host queues the next call while
  // the device runs this one, as bench_torch.py's events do and as a model's step runs.
  CudaMarks marks;
  marks.mark();
  int calls = 0;
  double start = now_seconds();
  while (calls < min_samples || (now_seconds() - start < min_seconds && calls < 2000)) {
    fn();
    marks.mark();
    ++calls;
  }
  std::vector<double> ms = marks.intervals_ms();
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double copy_gbps(Device d, double traffic_bytes) {
  const int64_t n = std::max<int64_t>(1, int64_t(traffic_bytes / 8));  // f32 elements read, and as many written
  Tensor a = randn({n}, {.device = d}), b = Tensor::empty({n}, {.device = d});
  auto src = reinterpret_cast<CUdeviceptr>(a.data_ptr()), dst = reinterpret_cast<CUdeviceptr>(b.data_ptr());
  double ms = device_ms([&] { cuda_copy_on_device(dst, src, size_t(n) * 4, d.index); });
  return gbps(2.0 * 4 * double(n), ms);
}

}  // namespace kiln::bench
