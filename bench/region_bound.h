// What bounds a recorded region (schedules/region_tuner.h) on this machine, for `kiln tune`: the
// bytes it must move (each input read once, each output written once) against a copy of as many
// bytes on the same device, and the GEMM flops inside it against this machine's measured GEMM
// rate. A region at its bound gains nothing from any schedule; the gap between a region's time
// and its bound is the most a schedule could save. (Inductor's benchmark harness reports GB/s
// per kernel the same way; a region that must read an input twice, as a softmax split over long
// rows does, can never reach this bound.) The inputs count whole: a region that reads part of one
// (a gather's rows of a table, a slice) can beat its bound, and kiln tune then takes the region's
// own time as its bound.
#pragma once
#include <string>

#include "schedules/region_tuner.h"

namespace kiln::bench {

struct RegionTraffic {
  double bytes = 0;  // inputs' distinct elements (a broadcast input counts once) + outputs
  double flops = 0;  // 2 M N K of each GEMM op inside the region
};

RegionTraffic region_traffic(const RecordedRegion& r);

// The device's rates for region bounds, measured on first use per device.
struct DeviceRates {
  // Milliseconds of a copy moving `bytes` in all (half read, half written) on `device`: cudaMemcpy
  // on the device for CUDA, kiln's eager clone of an f32 tensor on the CPU (its thread pool).
  double copy_ms(double bytes) const;
  double gemm_gflops = 0;  // the CPU's best measured GEMM rate (the tuning database's GEMM record); 0 on CUDA
  Device device = Device::cpu();
};

DeviceRates measure_device_rates(Device device);

struct RegionBoundResult {
  double bound_ms = 0;   // max(copy of its bytes, its flops at the GEMM rate)
  std::string limit;     // "memory" or "gemm"
};

RegionBoundResult region_bound(const RegionTraffic& t, const DeviceRates& rates);

}  // namespace kiln::bench
