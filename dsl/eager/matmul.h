// Which CPU GEMM the eager matmul runs: the generator-built Halide kernels, Eigen, or (the default)
// whichever measured faster for the problem's size (the rule is in dsl/eager/matmul.cpp). Tests and
// benchmarks force one to check or time each.
//
//   MatmulBackendGuard g(MatmulBackend::halide);   // matmul() runs the Halide kernels in this scope
#pragma once
#include <array>

#include "dsl/eager/gemm_choice.h"
#include "dsl/shape.h"
#include "dsl/tensor.h"

namespace kiln {

enum class MatmulBackend { automatic, halide, eigen };

void set_matmul_backend(MatmulBackend b);
MatmulBackend matmul_backend();

// Whether matmul runs an f32 problem a [m, k] x b [k, n] on Eigen (else Halide's kernels), by the
// backend set above and the machine's choice.
bool eager_gemm_uses_eigen(int64_t m, int64_t k, int64_t n);
// Times Halide's tiled f32 GEMM against Eigen's on this machine, on square problems of 32 to 1024
// (about 0.3 s on 2 cores); dsl/eager/gemm_choice.h says how the result is used.
GemmChoice measure_gemm_choice();

// Which operands (a, b) the CUDA matmul copies dense before its cuBLAS call: matrices neither row-
// nor column-major (batch dims that do not merge into one stride need no copy: the matmul passes
// cuBLAS an array of pointers, dsl/eager/cublas_gemm.h). The compiled
// path inserts the copies into its graph instead (graph/cublas_gemm_operands.cpp), where a
// pipeline makes them.
std::array<bool, 2> cublas_dense_copies(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                                        const Strides& b_strides, const Shape& out_shape);
// Whether the CUDA matmul_bias adds its bias in cuBLASLt's epilogue for these operands: one
// matrix product once batch dims fold into rows (a Linear on [B, T, C]), both operands read in
// place. Otherwise it runs the GEMM and then adds the bias with a kernel of its own.
bool cublas_bias_epilogue_applies(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                                  const Strides& b_strides, const Shape& out_shape);
// The dense copy of an operand: contiguous, except that a matrix stored by columns
// (stored_by_columns: a transposed view) stays so, the copy reading and writing along the same
// dim, and cuBLAS reads it transposed.
Tensor dense_copy(const Tensor& t);
bool stored_by_columns(const Shape& shape, const Strides& strides);

class MatmulBackendGuard {
 public:
  explicit MatmulBackendGuard(MatmulBackend b) : old_(matmul_backend()) { set_matmul_backend(b); }
  ~MatmulBackendGuard() { set_matmul_backend(old_); }
  MatmulBackendGuard(const MatmulBackendGuard&) = delete;
  MatmulBackendGuard& operator=(const MatmulBackendGuard&) = delete;

 private:
  MatmulBackend old_;
};

}  // namespace kiln
