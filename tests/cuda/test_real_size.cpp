// Every GPU schedule class at the sizes a GPT-2 small training step runs (bench/real_kernels.h:
// pointwise, an AdamW update over a [50304, 768] table, row ops 64 to 50304 wide forward and
// backward, a column and a full reduction, the embedding and its scatter-add, transposed copies),
// compiled by the halide backend and eager on CUDA, against the same function computed eagerly in
// f64 from the same inputs (on the GPU: the f64 references of 400M-element rows on the CPU took
// minutes of the GPU machine's time). Each output must be within 1e-4 of the reference, relative to the
// reference's largest magnitude (sums over 8192 or 64M elements, and the atomic adds of the
// embedding's backward, round in another order). KILN_REAL_FILTER=name runs one case.
#include <cstdlib>
#include <string>

#include "bench/real_kernels.h"
#include "bench/zoo.h"
#include "cuda/cuda_available.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr double kTolerance = 1e-4;

TensorList in_f64(const TensorList& xs) {
  TensorList out;
  for (const Tensor& x : xs) out.push_back(is_floating(x.dtype()) ? x.to(DType::f64) : x);
  return out;
}

// The largest |got - want| over the largest |want|.
double relative_error(const Tensor& got, const Tensor& want) {
  Tensor g = got.to(DType::f64);
  double scale = std::max(1e-30, max(abs(want)).item<double>());
  return max(abs(g - want)).item<double>() / scale;
}

void check_case(bench::RealKernel& k) {
  NoGradGuard no_grad;
  manual_seed(0);
  TensorList in = k.inputs();
  TensorList want = k.fn(in_f64(in));
  zoo::ZooFunction f(k.fn, {.backend = "halide", .name = "real_" + k.name});
  TensorList compiled = f(in), eager = k.fn(in);
  BOOST_TEST_REQUIRE(compiled.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT(k.name << " " << to_string(k.shape) << " output " << i) {
      BOOST_TEST(compiled[i].device() == kCuda);
      BOOST_TEST(compiled[i].shape() == want[i].shape());
      BOOST_TEST(relative_error(compiled[i], want[i]) <= kTolerance);
      BOOST_TEST(relative_error(eager[i], want[i]) <= kTolerance);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(real_size_schedules_match_f64, *needs_cuda()) {
  set_float32_matmul_precision(Float32MatmulPrecision::highest);
  const char* only = std::getenv("KILN_REAL_FILTER");
  int checked = 0;
  for (bench::RealKernel& k : bench::real_kernels(kCuda)) {
    if (only && *only && k.name != only) continue;
    BOOST_TEST_MESSAGE("real size: " << k.name << " " << to_string(k.shape));
    check_case(k);
    ++checked;
  }
  BOOST_TEST(checked > 0);
}
