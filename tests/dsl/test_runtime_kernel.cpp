// dsl/cuda/runtime_kernel.h without a GPU: CUDA source compiled with NVRTC to PTX for a given
// compute capability (a custom op's CUDA kernel), and a source that does not compile is a
// kiln::Error carrying NVRTC's log with the line. Skips with a message where NVRTC is missing.
// Launching is tests/cuda/test_custom_op.cpp's.
#include <boost/test/unit_test.hpp>

#include "dsl/cuda/runtime_kernel.h"
#include "support/custom_ops.h"
#include "support/preconditions.h"
#include "support/reference.h"

using namespace kiln;

BOOST_AUTO_TEST_CASE(cuda_source_compiles_to_ptx_for_each_architecture, *test::needs(nvrtc_unavailable_reason)) {
  RuntimeKernel k(test::bias_gelu_cuda_source(), "bias_gelu_f32");
  std::string hopper = k.ptx(9, 0), ampere = k.ptx(8, 0);
  BOOST_TEST(hopper.find(".entry bias_gelu_f32") != std::string::npos);
  BOOST_TEST(hopper.find(".entry bias_gelu_f64") != std::string::npos);
  BOOST_TEST(hopper.find(".target sm_90") != std::string::npos);
  BOOST_TEST(ampere.find(".target sm_80") != std::string::npos);
  BOOST_TEST(k.ptx(9, 0) == hopper);  // compiled once
}

BOOST_AUTO_TEST_CASE(a_source_that_does_not_compile_is_an_error_with_nvrtcs_log, *test::needs(nvrtc_unavailable_reason)) {
  RuntimeKernel k("extern \"C\" __global__ void broken(float* y) {\n  y[0] = undeclared_name;\n}\n", "broken");
  test::check_error([&] { k.ptx(9, 0); }, {"CUDA kernel broken", "NVRTC", "broken.cu(2)", "undeclared_name"});
}

BOOST_AUTO_TEST_CASE(a_cpu_tensor_is_not_a_cuda_kernels_argument) {
  test::check_error([] { KernelArg a(Tensor::empty({3})); }, {"CUDA kernel", "cpu", "to(Device::cuda())"});
}
