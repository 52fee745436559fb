// One instruction-set build of the Eigen GEMM behind dsl/eager/eigen_gemm.h. dsl/CMakeLists.txt
// compiles this file once per ISA with that ISA's flags, KILN_EIGEN_ISA set to its name and the
// `Eigen` namespace renamed (-DEigen=kiln_eigen_<isa>), so the three builds of Eigen's templates
// never merge at link time. Include nothing here that defines inline code shared with the rest of
// kiln (std containers, kiln headers with inline functions): the linker could pick this build's
// copy for code that must run on any CPU. Single-threaded; the caller splits the work.
#include <Eigen/Core>

#include "dsl/eager/eigen_gemm.h"

#define KILN_CONCAT2(a, b) a##_##b
#define KILN_CONCAT(a, b) KILN_CONCAT2(a, b)

namespace kiln::eigen_gemm_detail {

namespace {

using Eigen::Dynamic;
using Eigen::OuterStride;
template <typename T>
using RowMap = Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>, Eigen::Unaligned, OuterStride<>>;
template <typename T>
using ColMap = Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, Eigen::ColMajor>, Eigen::Unaligned, OuterStride<>>;
template <typename T>
using Dense = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;

// Calls f with an Eigen view of the rows x cols matrix at p: a row- or column-major map when one
// stride is 1 (or its dim has size 1), else a dense copy in `scratch`.
template <typename T, typename F>
void with_matrix(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, Dense<T>& scratch, F&& f) {
  if (cs == 1 || cols == 1) {
    f(RowMap<T>(p, rows, cols, OuterStride<>(rows == 1 ? cols : rs)));
  } else if (rs == 1 || rows == 1) {
    f(ColMap<T>(p, rows, cols, OuterStride<>(cs)));
  } else {
    scratch.resize(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) scratch(r, c) = p[r * rs + c * cs];
    f(RowMap<T>(scratch.data(), rows, cols, OuterStride<>(cols)));
  }
}

template <typename T>
void gemm(const T* a, const T* b, T* c, const GemmProblem& p) {
  using Out = Eigen::Map<Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>, Eigen::Unaligned, OuterStride<>>;
  Dense<T> scratch_a, scratch_b;
  for (int64_t i = 0; i < p.batch; ++i) {
    Out out(c + i * p.c.batch, p.m, p.n, OuterStride<>(p.m == 1 ? p.n : p.c.row));
    if (p.k == 0) {
      out.setZero();
      continue;
    }
    with_matrix(a + i * p.a.batch, p.m, p.k, p.a.row, p.a.col, scratch_a, [&](const auto& ma) {
      with_matrix(b + i * p.b.batch, p.k, p.n, p.b.row, p.b.col, scratch_b,
                  [&](const auto& mb) { out.noalias() = ma * mb; });
    });
  }
}

}  // namespace

void KILN_CONCAT(gemm_f32, KILN_EIGEN_ISA)(const float* a, const float* b, float* c, const GemmProblem& p) {
  gemm(a, b, c, p);
}

void KILN_CONCAT(gemm_f64, KILN_EIGEN_ISA)(const double* a, const double* b, double* c, const GemmProblem& p) {
  gemm(a, b, c, p);
}

}  // namespace kiln::eigen_gemm_detail
