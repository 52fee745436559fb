#include "bench/region_bound.h"

#include <algorithm>
#include <cstdlib>

#include "bench/gpu_timing.h"
#include "bench/timing.h"
#include "dsl/eager/gemm_choice.h"
#include "schedules/tuning_db.h"

namespace kiln::bench {

namespace {

// The elements a strided tensor spans: a broadcast dim (stride 0) adds none, so an input read
// along it counts once; never more than its element count.
double distinct_elements(const Tensor& t) {
  const Shape& shape = t.shape();
  int64_t n = numel(shape);
  if (n == 0) return 0;
  int64_t span = 1;
  for (size_t i = 0; i < shape.size(); ++i) span += (shape[i] - 1) * std::abs(t.strides()[i]);
  return double(std::min(n, span));
}

// 2 M N K for a GEMM node: its output's last two dims are [M, N]; K is the other of its first
// input's last two dims (the input may be transposed; where M == K either is K).
double gemm_flops(const Graph& g, const GraphNode& node) {
  const Shape& a = g.values[node.inputs.at(0)].meta.shape;
  const Shape& c = g.values[node.outputs.at(0)].meta.shape;
  if (a.size() < 2 || c.size() < 2) return 0;
  int64_t m = c[c.size() - 2];
  int64_t k = a.back() == m ? a[a.size() - 2] : a.back();
  return 2.0 * double(numel(c)) * double(k);
}

}  // namespace

RegionTraffic region_traffic(const RecordedRegion& r) {
  RegionTraffic t;
  for (const Tensor& in : r.inputs) t.bytes += distinct_elements(in) * double(itemsize(in.dtype()));
  for (size_t i = 0; i < r.output_shapes.size(); ++i)
    t.bytes += double(numel(r.output_shapes[i])) * double(itemsize(r.output_dtypes.at(i)));
  for (int n : r.region.nodes) {
    const GraphNode& node = r.graph->nodes[n];
    if (node.op->gemm) t.flops += gemm_flops(*r.graph, node);
  }
  return t;
}

double DeviceRates::copy_ms(double bytes) const {
  if (bytes <= 0) return 0;
  if (device.is_cuda()) return bytes / (copy_gbps(device, bytes) * 1e9) * 1e3;
  // kiln's eager copy of as many bytes: half of them read, half written.
  Tensor a = randn({std::max<int64_t>(1, int64_t(bytes / 8))}, {.device = device});
  Tensor b;
  double s = time_median([&] { b = a.clone(); }, 1, 3, 11, 0.1, 200).median_s;
  return s * 1e3;
}

DeviceRates measure_device_rates(Device device) {
  DeviceRates rates;
  rates.device = device;
  if (device.is_cpu())
    if (std::optional<GemmChoice> choice = machine_gemm_choice_from_db())  // measured once per machine
      for (const GemmPoint& p : choice->points)
        rates.gemm_gflops = std::max({rates.gemm_gflops, p.halide_gflops, p.eigen_gflops});
  return rates;
}

RegionBoundResult region_bound(const RegionTraffic& t, const DeviceRates& rates) {
  RegionBoundResult b{rates.copy_ms(t.bytes), "memory"};
  if (t.flops > 0 && rates.gemm_gflops > 0) {
    double gemm_ms = t.flops / (rates.gemm_gflops * 1e9) * 1e3;
    if (gemm_ms > b.bound_ms) b = {gemm_ms, "gemm"};
  }
  return b;
}

}  // namespace kiln::bench
