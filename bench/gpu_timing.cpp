#include "bench/gpu_timing.h"

#include <algorithm>
#include <vector>

#include "bench/timing.h"

namespace kiln::bench {

double device_ms(const std::function<void()>& fn, int warmup, int min_samples, double min_seconds) {
  for (int i = 0; i < warmup; ++i) fn();
  cuda_synchronize();
  CudaTimer timer;
  std::vector<double> ms;
  double start = now_seconds();
  while (int(ms.size()) < min_samples || (now_seconds() - start < min_seconds && ms.size() < 2000)) {
    timer.start();
    fn();
    ms.push_back(timer.stop_ms());
  }
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
