// Custom ops of the tests (dsl/custom_op.h), registered once a process: test::bias_gelu() is
// gelu(x + b) with the erf form over rows of b's length, its CPU kernel plain loops (f32 and
// f64), its CUDA kernel CUDA source compiled at run time with NVRTC (dsl/cuda/runtime_kernel.h),
// its derivative rule Tensor ops (bias_gelu_nvcc: its CUDA kernel built by nvcc); the others are it with one thing broken, for check_op's
// tests (graph/check_op.h).
#pragma once
#include "dsl/custom_op.h"

namespace kiln::test {

// "kiln_test::bias_gelu": x [..., N], b [N] -> gelu(x + b).
const OpDef& bias_gelu();

#ifdef KILN_TEST_NVCC
// bias_gelu with its CUDA kernel compiled by nvcc (tests/support/bias_gelu.cu, through
// kiln_add_cuda_kernels), launched on kiln's stream; defined where the build found nvcc.
const OpDef& bias_gelu_nvcc();
#endif

// bias_gelu with a shape rule that says [..., N + 1].
const OpDef& bias_gelu_wrong_shape_rule();
// bias_gelu whose derivative rule forgets the erf term's exponential part.
const OpDef& bias_gelu_wrong_gradient();
// bias_gelu whose kernel adds b into x in place before computing.
const OpDef& bias_gelu_writes_its_input();

// bias_gelu whose CUDA kernel computes GELU's tanh approximation (about 1e-3 from the CPU's erf).
const OpDef& bias_gelu_cuda_disagrees();

// The CUDA source of bias_gelu's kernels (bias_gelu_f32, bias_gelu_f64).
std::string bias_gelu_cuda_source();

}  // namespace kiln::test
