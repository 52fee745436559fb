// The Eigen GEMM's front: picks the instruction-set build for this CPU and splits large problems
// into tasks on Halide's thread pool (by batch, else by rows or columns). Eigen's own OpenMP
// threading measured about 3x slower than this split while other processes shared the 2 cores
// (its threads spin at barriers), and would add a second thread pool beside Halide's.
#include "dsl/eager/eigen_gemm.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <type_traits>

#include "dsl/eager/cpu_isa.h"
#include "dsl/error.h"
#include "dsl/tensor.h"

namespace kiln {

namespace eigen_gemm_detail {
#define KILN_DECLARE_EIGEN_GEMM(isa)                                                         \
  void gemm_f32_##isa(const float* a, const float* b, float* c, const GemmProblem& p);   \
  void gemm_f64_##isa(const double* a, const double* b, double* c, const GemmProblem& p);
KILN_DECLARE_EIGEN_GEMM(baseline)
#if defined(__x86_64__)
KILN_DECLARE_EIGEN_GEMM(avx2)
KILN_DECLARE_EIGEN_GEMM(avx512)
#endif
#undef KILN_DECLARE_EIGEN_GEMM
}  // namespace eigen_gemm_detail

namespace {

using namespace eigen_gemm_detail;

template <typename T>
using GemmFn = void (*)(const T*, const T*, T*, const GemmProblem&);

template <typename T>
GemmFn<T> gemm_for_cpu() {
  constexpr bool f32 = std::is_same_v<T, float>;
  switch (cpu_isa()) {
#if defined(__x86_64__)
    case CpuIsa::avx512: if constexpr (f32) return &gemm_f32_avx512; else return &gemm_f64_avx512;
    case CpuIsa::avx2: if constexpr (f32) return &gemm_f32_avx2; else return &gemm_f64_avx2;
#endif
    default: if constexpr (f32) return &gemm_f32_baseline; else return &gemm_f64_baseline;
  }
}

// Below this many multiply-adds one thread does the whole problem.
constexpr double kParallelMinMacs = 1 << 20;

template <typename T>
struct Split {
  const T* a;
  const T* b;
  T* c;
  GemmProblem p;
  GemmFn<T> fn;
  int tasks;
  char by;  // 'b': batch, 'm': rows, 'n': columns
  int64_t extent, step;
};

// The i-th of `tasks` parts of [0, extent), rounded to multiples of `step`.
std::pair<int64_t, int64_t> part(int64_t extent, int64_t step, int tasks, int i) {
  int64_t units = (extent + step - 1) / step;
  int64_t u0 = units * i / tasks, u1 = units * (i + 1) / tasks;
  return {std::min(extent, u0 * step), std::min(extent, u1 * step)};
}

template <typename T>
int run_part(void*, int i, uint8_t* closure) {
  const Split<T>& s = *reinterpret_cast<const Split<T>*>(closure);
  auto [lo, hi] = part(s.extent, s.step, s.tasks, i);
  if (lo >= hi) return 0;
  GemmProblem p = s.p;
  const T* a = s.a;
  const T* b = s.b;
  T* c = s.c;
  if (s.by == 'b') {
    p.batch = hi - lo;
    a += lo * p.a.batch, b += lo * p.b.batch, c += lo * p.c.batch;
  } else if (s.by == 'm') {
    p.m = hi - lo;
    a += lo * p.a.row, c += lo * p.c.row;
  } else {
    p.n = hi - lo;
    b += lo * p.b.col, c += lo * p.c.col;
  }
  try {
    s.fn(a, b, c, p);
  } catch (...) {
    return -1;  // allocation failure in a scratch copy
  }
  return 0;
}

template <typename T>
void gemm(const T* a, const T* b, T* c, const GemmProblem& p) {
  KILN_CHECK(p.c.col == 1, "eigen_gemm: the output's rows must be dense (column stride 1), got ", p.c.col);
  if (p.batch <= 0 || p.m <= 0 || p.n <= 0) return;
  Split<T> s{a, b, c, p, gemm_for_cpu<T>(), 1, 'b', p.batch, 1};
  double macs = double(p.batch) * double(p.m) * double(p.n) * double(p.k);
  int threads = cpu_kernel_threads();
  if (threads == 1 || macs < kParallelMinMacs) {
    s.fn(a, b, c, p);
    return;
  }
  if (p.batch >= threads) {
    s.tasks = int(std::min<int64_t>(p.batch, threads));
  } else if (p.m >= p.n) {
    s.by = 'm', s.extent = p.m, s.step = 8;
  } else {
    s.by = 'n', s.extent = p.n, s.step = 16;
  }
  if (s.by != 'b') s.tasks = int(std::max<int64_t>(1, std::min<int64_t>(threads, (s.extent + s.step - 1) / s.step)));
  int rc = halide_do_par_for(nullptr, &run_part<T>, 0, s.tasks, reinterpret_cast<uint8_t*>(&s));
  KILN_CHECK(rc == 0, "eigen_gemm: a task failed (out of memory for a scratch copy?)");
}

GemmProblem dense(int64_t m, int64_t n, int64_t k) {
  GemmProblem p{1, m, n, k, {}, {}, {}};
  p.a = {m * k, k, 1};
  p.b = {k * n, n, 1};
  p.c = {m * n, n, 1};
  return p;
}

}  // namespace

void eigen_gemm_f32(const float* a, const float* b, float* c, const GemmProblem& p) { gemm(a, b, c, p); }
void eigen_gemm_f64(const double* a, const double* b, double* c, const GemmProblem& p) { gemm(a, b, c, p); }
void eigen_gemm_f32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemm(a, b, c, dense(m, n, k));
}
void eigen_gemm_f64(const double* a, const double* b, double* c, int64_t m, int64_t n, int64_t k) {
  gemm(a, b, c, dense(m, n, k));
}

void eigen_gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2, "eigen_gemm: expects 2-D tensors, got shapes ",
             to_string(a.shape()), ", ", to_string(b.shape()), " and ", to_string(out.shape()));
  KILN_CHECK(a.size(1) == b.size(0) && out.size(0) == a.size(0) && out.size(1) == b.size(1),
             "eigen_gemm: shapes ", to_string(a.shape()), " x ", to_string(b.shape()), " -> ",
             to_string(out.shape()), " do not fit (inner dims must match, out must be (M, N))");
  KILN_CHECK(a.dtype() == b.dtype() && a.dtype() == out.dtype() && (a.dtype() == f32 || a.dtype() == f64),
             "eigen_gemm: expects f32 or f64 tensors of one dtype, got ", a.dtype(), ", ", b.dtype(), " and ",
             out.dtype());
  KILN_CHECK(a.device().is_cpu() && b.device().is_cpu() && out.device().is_cpu(), "eigen_gemm: CPU tensors only");
  KILN_CHECK(out.is_contiguous(), "eigen_gemm: out must be contiguous");
  GemmProblem p{1, a.size(0), b.size(1), a.size(1), {0, a.stride(0), a.stride(1)}, {0, b.stride(0), b.stride(1)},
                {0, out.size(1), 1}};
  if (a.dtype() == f32) {
    gemm(static_cast<const float*>(a.data_ptr()), static_cast<const float*>(b.data_ptr()),
         static_cast<float*>(out.data_ptr()), p);
  } else {
    gemm(static_cast<const double*>(a.data_ptr()), static_cast<const double*>(b.data_ptr()),
         static_cast<double*>(out.data_ptr()), p);
  }
}

const char* eigen_gemm_isa() { return name(cpu_isa()); }

}  // namespace kiln
