// Which CPU GEMM the eager matmul runs: the generator-built Halide kernels, Eigen, or (the default)
// whichever measured faster for the problem's size (the rule is in dsl/eager/matmul.cpp). Tests and
// benchmarks force one to check or time each.
//
//   MatmulBackendGuard g(MatmulBackend::halide);   // matmul() runs the Halide kernels in this scope
#pragma once

namespace kiln {

enum class MatmulBackend { automatic, halide, eigen };

void set_matmul_backend(MatmulBackend b);
MatmulBackend matmul_backend();

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
