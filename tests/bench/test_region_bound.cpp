// A region's bound for kiln tune (bench/region_bound.h): the bytes it must move are its inputs'
// and outputs' (counted from the shapes, independently of the recorder), a GEMM inside it counts
// 2 M N K flops, and the bound is the larger of a copy of its bytes and its flops at the measured
// GEMM rate.
#include "bench/region_bound.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::bench;
using namespace kiln::test;

namespace {

std::vector<RecordedRegion> record(const std::function<void()>& call) {
  call();  // compiles
  RegionRecorder recorder;
  call();
  return recorder.regions();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_region_moves_its_inputs_and_outputs) {
  manual_seed(3);
  Tensor x = randn({256, 384}), y = randn({384});
  auto f = compile([](Tensor a, Tensor b) { return (a * b).sum({0}); }, {.backend = "halide"});
  NoGradGuard no_grad;
  std::vector<RecordedRegion> regions = record([&] { f(x, y); });
  BOOST_TEST_REQUIRE(regions.size() == 1u);
  RegionTraffic t = region_traffic(regions[0]);
  BOOST_TEST(t.bytes == double((256 * 384 + 384 + 384) * 4));
  BOOST_TEST(t.flops == 0);
}

BOOST_AUTO_TEST_CASE(a_gemm_inside_a_region_counts_its_flops) {
  // A captured weight read transposed, few rows: the CPU computes the GEMM inside the region with
  // its epilogue (schedules/lowerable.cpp) rather than as an eager step.
  manual_seed(4);
  Tensor w = randn({112, 80}), x = randn({96, 80});
  auto f = compile([&](Tensor p) { return relu(matmul(p, w.t())); }, {.backend = "halide"});
  NoGradGuard no_grad;
  std::vector<RecordedRegion> regions = record([&] { f(x); });
  BOOST_TEST_REQUIRE(regions.size() == 1u);
  RegionTraffic t = region_traffic(regions[0]);
  BOOST_TEST(t.flops == 2.0 * 96 * 80 * 112);
  // The region reads the weight as packed panels of 32 columns (schedules/weight_packing.h): 112
  // columns are stored as 128.
  BOOST_TEST(t.bytes == double((96 * 80 + 128 * 80 + 96 * 112) * 4));
}

BOOST_AUTO_TEST_CASE(the_bound_is_the_larger_of_the_copy_and_the_gemm) {
  DeviceRates rates = measure_device_rates(Device::cpu());
  RegionTraffic memory{double(int64_t(64) << 20), 0};
  RegionBoundResult b = region_bound(memory, rates);
  BOOST_TEST(b.limit == "memory");
  BOOST_TEST(b.bound_ms > 0);
  BOOST_TEST(b.bound_ms < 1000);
  rates.gemm_gflops = 1;  // a made-up slow GEMM: 1e9 flops take a second
  RegionBoundResult g = region_bound({1024, 1e9}, rates);
  BOOST_TEST(g.limit == "gemm");
  BOOST_TEST(g.bound_ms == 1000, boost::test_tools::tolerance(1e-9));
}
