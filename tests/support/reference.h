// Test support: fresh random inputs made without kiln's kernels, values read back by walking
// strides on the host, reference loops in double, and per-dtype tolerances.
#pragma once
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::test {

// Uniform values in [lo, hi) from a test-local generator (seeded per call site by `seed`), so
// inputs differ between cases and never depend on kiln's own kernels.
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -2, double hi = 2);
// Same values as random_tensor, but laid out as a non-contiguous view of the given kind:
// "transposed" (last two dims swapped in memory), "sliced" (every other element of a bigger
// tensor along each dim), "expanded" (size-1 dims of `base` broadcast to `shape`).
Tensor random_view(const Shape& shape, DType dtype, uint64_t seed, const std::string& kind);

// All values in row-major order, read through the tensor's strides with plain host code (a CUDA
// tensor is copied to the host first).
std::vector<double> host_values(const Tensor& t);

// A fresh directory for a test's files under the system's temporary folder, named after `name`
// and the process, removed with everything in it at the end.
struct TempDir {
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& file_name) const { return (path / file_name).string(); }
  std::filesystem::path path;
};

// Same shape, dtype and bytes (compiled code checked bit for bit against the same code elsewhere).
bool same_bits(const Tensor& a, const Tensor& b);

// Row-major multi-index iteration over a shape.
void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn);
// Row-major linear index of `idx` in `shape`, with broadcasting: dims of size 1 read index 0,
// and missing leading dims are dropped.
int64_t broadcast_offset(const Shape& shape, const std::vector<int64_t>& idx);

// A reduction in double: for each output element of x reduced over `dims` (kiln order, negative
// from the end; all when empty), `f` of the reduced values in row-major order of the reduced
// dims. Sets *out_shape to the result's shape (the reduced dims kept as 1 with keepdim).
using Reducer = std::function<double(const std::vector<double>&)>;
std::vector<double> reduction_reference(const Tensor& x, const std::vector<int64_t>& dims, const Reducer& f,
                                        Shape* out_shape, bool keepdim);
double sum_of(const std::vector<double>& v);
double mean_of(const std::vector<double>& v);
double max_of(const std::vector<double>& v);
double min_of(const std::vector<double>& v);
Reducer var_of(int64_t correction);
double logsumexp_of(const std::vector<double>& v);

// Row ops in double. along_dim applies f to every line of x along `dim` (row-major order) and
// returns x's values with each line replaced by f's result; softmax_line and log_softmax_line
// are such f. The two-tensor form gives f the lines of a and b (one shape) at the same place (a
// backward's output and gradient). layer_norm_reference normalizes rows of the last `normalized`
// elements (weight and bias undefined: none); cross_entropy_reference is the mean over rows of
// (N, C) logits (or one row of C) of -log_softmax at each row's target.
using Line = std::vector<double>;
std::vector<double> along_dim(const Tensor& x, int64_t dim, const std::function<Line(const Line&)>& f);
std::vector<double> along_dim(const Tensor& a, const Tensor& b, int64_t dim,
                              const std::function<Line(const Line&, const Line&)>& f);
std::vector<double> softmax_line(const std::vector<double>& line);
std::vector<double> log_softmax_line(const std::vector<double>& line);
std::vector<double> layer_norm_reference(const Tensor& x, int64_t normalized, const Tensor& w, const Tensor& b,
                                         double eps);
double cross_entropy_reference(const Tensor& logits, const Tensor& targets);

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(DType t);

// Checks shape, dtype and every value within tolerance; reports the first mismatches.
void check_close(const Tensor& got, const std::vector<double>& want, const Shape& want_shape,
                 Tolerance tol, const std::string& what);
inline void check_close(const Tensor& got, const std::vector<double>& want, const Shape& want_shape,
                        const std::string& what) {
  check_close(got, want, want_shape, tolerance(got.dtype()), what);
}

// GELU in double: the exact form x (1 + erf(x / sqrt 2)) / 2 (approximate "none") or the tanh
// form (approximate "tanh"), and its derivative.
double gelu_reference(double x, const std::string& approximate);
double gelu_grad_reference(double x, const std::string& approximate);

// matmul in double, with PyTorch's rules: 1-D operands (a row, a column) and broadcast batch
// dims; *shape receives the result's shape.
std::vector<double> matmul_reference(const Tensor& a, const Tensor& b, Shape* shape);
// A Linear in double: x [M, K] (batch dims folded into M) times w [N, K] transposed, plus bias [N]
// (undefined: none); row-major [M, N].
std::vector<double> linear_reference(const Tensor& x, const Tensor& w, const Tensor& bias);

// Attention in double: out = softmax(scale q k^T, causally masked or not) v and the gradients of
// sum(out * dout), per (batch, head), from the operands' values (any dtype, layout, device).
struct AttentionReference {
  std::vector<double> out, dq, dk, dv;
};
AttentionReference attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                       bool causal, double scale);

// A file's bytes; empty when it cannot be read.
std::string file_bytes(const std::string& path);

// The text of the one file in `dir` whose name ends with `suffix` (a debug dump's file); a
// failed check when there is none or more than one.
std::string dumped(const std::string& dir, const std::string& suffix);

// The backend the compile tests run on: KILN_BACKEND (ctest runs some suites on both), else "halide".
inline std::string backend_under_test() {
  const char* b = std::getenv("KILN_BACKEND");
  return b && *b ? b : "halide";
}

// Asserts that `fn` throws kiln::Error whose message contains every one of `parts`.
void check_error(const std::function<void()>& fn, const std::vector<std::string>& parts);

}  // namespace kiln::test
