// Eigen's GEMM on the CPU: the eager matmul's kernel where it measures faster than the Halide GEMM,
// and the reference `kiln bench ops` times as "eigen_matmul". Eigen's speed depends on the
// instruction set it is compiled for and kiln must run on any x86-64, so the kernel is compiled
// three times (AVX-512, AVX2+FMA, baseline; dsl/eigen_gemm/) and the best one this CPU supports is
// picked at run time. Large problems are split across cores on Halide's thread pool (the pool the
// eager kernels use, so the two never oversubscribe the machine).
//
//   eigen_gemm_f32(a, b, c, M, N, K);      // dense row-major: c (M x N) = a (M x K) * b (K x N)
//   GemmProblem p{.batch = 4, .m = M, .n = N, .k = K,
//                 .a = {M * K, K, 1}, .b = {0, 1, K}, .c = {M * N, N, 1}};  // b transposed, shared
//   eigen_gemm_f32(a, b, c, p);
#pragma once
#include <cstdint>

namespace kiln {

class Tensor;

// Element (r, c) of matrix i lies at ptr + i * batch + r * row + c * col (any strides, 0 included).
struct GemmStrides {
  int64_t batch = 0, row = 0, col = 1;
};

// c[i] = a[i] (m x k) * b[i] (k x n) for each i < batch. c must not overlap a or b, and its rows
// must be dense (c.col == 1). k == 0 gives zeros.
struct GemmProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GemmStrides a, b, c;
};

void eigen_gemm_f32(const float* a, const float* b, float* c, const GemmProblem& p);
void eigen_gemm_f64(const double* a, const double* b, double* c, const GemmProblem& p);
void eigen_gemm_f32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);
void eigen_gemm_f64(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k);

// out = a @ b for 2-D f32 or f64 CPU tensors: a and b with any strides, out dense of shape (M, N).
void eigen_gemm(const Tensor& a, const Tensor& b, const Tensor& out);

// The build chosen for this CPU: "avx512", "avx2" or "baseline".
const char* eigen_gemm_isa();

}  // namespace kiln
