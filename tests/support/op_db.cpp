#include "support/op_db.h"

#include <cmath>
#include <stdexcept>

#include "support/reference.h"

namespace kiln::test {

namespace {

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

// Single-precision results on CUDA against the CPU's: a few ulp apart (libdevice's math).
const Tolerance kCudaF32{1e-5, 1e-5};

}  // namespace

Tolerance UnaryOpEntry::against_reference(DType t) const {
  Tolerance tol = tolerance(t);
  if (t == DType::f32 && f32_atol > 0) tol.atol = f32_atol;
  return tol;
}

Tolerance UnaryOpEntry::cuda_against_cpu() const { return kCudaF32; }

std::array<double, 4> BinaryOpEntry::gradient_ranges() const {
  return smooth ? *smooth : std::array<double, 4>{lhs_lo, lhs_hi, rhs_lo, rhs_hi};
}

Tolerance BinaryOpEntry::against_reference(DType t) const {
  if (t == DType::f16 && f16_tol > 0) return {f16_tol, f16_tol};
  return tolerance(t);
}

Tolerance BinaryOpEntry::cuda_against_cpu() const {
  if (op_def(op).comparison) return {0, 0};
  return f32_tol > 0 ? Tolerance{f32_tol, f32_tol} : kCudaF32;
}

Tolerance compiled_against_eager(DType t) { return t == DType::f64 ? Tolerance{1e-10, 1e-10} : Tolerance{1e-5, 1e-5}; }

// An entry from the call's expression in x: its code (what printed fuzz programs show) is the
// same text.
#define KILN_UNARY_ENTRY(op, label, expr, ...) \
  UnaryOpEntry { op, label, [](const Tensor& x) { return expr; }, #expr, __VA_ARGS__ }

const std::vector<UnaryOpEntry>& unary_op_db() {
  using D = double;
  static const std::vector<UnaryOpEntry> db = {
      KILN_UNARY_ENTRY("neg", "neg", neg(x), [](D x) { return -x; }, -3, 3, -2, 2, true),
      KILN_UNARY_ENTRY("abs", "abs", abs(x), [](D x) { return std::abs(x); }, -3, 3, 0.1, 2, true),
      KILN_UNARY_ENTRY("square", "square", square(x), [](D x) { return x * x; }, -3, 3, -2, 2, true),
      KILN_UNARY_ENTRY("relu", "relu", relu(x), [](D x) { return x > 0 ? x : 0; }, -3, 3, 0.1, 2, true),
      KILN_UNARY_ENTRY("exp", "exp", exp(x), [](D x) { return std::exp(x); }, -4, 4, -2, 2),
      KILN_UNARY_ENTRY("log", "log", log(x), [](D x) { return std::log(x); }, 0.01, 5, 0.2, 3),
      KILN_UNARY_ENTRY("sqrt", "sqrt", sqrt(x), [](D x) { return std::sqrt(x); }, 0, 5, 0.2, 3),
      KILN_UNARY_ENTRY("rsqrt", "rsqrt", rsqrt(x), [](D x) { return 1 / std::sqrt(x); }, 0.05, 5, 0.2, 3),
      KILN_UNARY_ENTRY("sin", "sin", sin(x), [](D x) { return std::sin(x); }, -6, 6, -3, 3),
      KILN_UNARY_ENTRY("cos", "cos", cos(x), [](D x) { return std::cos(x); }, -6, 6, -3, 3),
      KILN_UNARY_ENTRY("tanh", "tanh", tanh(x), [](D x) { return std::tanh(x); }, -4, 4, -2, 2),
      KILN_UNARY_ENTRY("sigmoid", "sigmoid", sigmoid(x), sigmoid_ref, -8, 8, -3, 3),
      KILN_UNARY_ENTRY("silu", "silu", silu(x), [](D x) { return x * sigmoid_ref(x); }, -8, 8, -3, 3),
      KILN_UNARY_ENTRY("reciprocal", "reciprocal", reciprocal(x), [](D x) { return 1 / x; }, 0.1, 4, 0.3, 3),
      KILN_UNARY_ENTRY("erf", "erf", erf(x), [](D x) { return std::erf(x); }, -4, 4, -2, 2),
      KILN_UNARY_ENTRY("softplus", "softplus", softplus(x), [](D x) { return std::log1p(std::exp(x)); }, -30, 30, -3, 3),
      KILN_UNARY_ENTRY("gelu", "gelu", gelu(x), [](D x) { return gelu_reference(x, "none"); }, -5, 5, -3, 3, false, 1e-6),
      KILN_UNARY_ENTRY("gelu", "gelu_tanh", gelu(x, "tanh"), [](D x) { return gelu_reference(x, "tanh"); }, -5, 5, -3, 3),
  };
  return db;
}

#undef KILN_UNARY_ENTRY

const std::vector<BinaryOpEntry>& binary_op_db() {
  using T = const Tensor&;
  using D = double;
  static const std::vector<BinaryOpEntry> db = {
      {"add", [](T a, T b) { return a + b; }, [](D a, D b) { return a + b; }, -3, 3, -3, 3},
      {"sub", [](T a, T b) { return a - b; }, [](D a, D b) { return a - b; }, -3, 3, -3, 3},
      {"mul", [](T a, T b) { return a * b; }, [](D a, D b) { return a * b; }, -3, 3, -3, 3},
      {"div", [](T a, T b) { return a / b; }, [](D a, D b) { return a / b; }, -3, 3, 0.5, 3, false},
      {"pow", [](T a, T b) { return pow(a, b); }, [](D a, D b) { return std::pow(a, b); }, 0.1, 3, -3, 3, false, 1e-5, 5e-3,
       std::array<double, 4>{0.5, 3, -2, 2}},
      {"maximum", [](T a, T b) { return maximum(a, b); }, [](D a, D b) { return std::max(a, b); }, -3, 3, -3, 3},
      {"minimum", [](T a, T b) { return minimum(a, b); }, [](D a, D b) { return std::min(a, b); }, -3, 3, -3, 3},
      {"eq", [](T a, T b) { return eq(a, b); }, [](D a, D b) { return D(a == b); }, -3, 3, -3, 3},
      {"ne", [](T a, T b) { return ne(a, b); }, [](D a, D b) { return D(a != b); }, -3, 3, -3, 3},
      {"lt", [](T a, T b) { return lt(a, b); }, [](D a, D b) { return D(a < b); }, -3, 3, -3, 3},
      {"le", [](T a, T b) { return le(a, b); }, [](D a, D b) { return D(a <= b); }, -3, 3, -3, 3},
      {"gt", [](T a, T b) { return gt(a, b); }, [](D a, D b) { return D(a > b); }, -3, 3, -3, 3},
      {"ge", [](T a, T b) { return ge(a, b); }, [](D a, D b) { return D(a >= b); }, -3, 3, -3, 3},
  };
  return db;
}

// Each with a call its test file must contain: the evidence that the suite exercises the op.
Tolerance ReductionOpEntry::against_reference(DType t, int64_t length) const {
  Tolerance tol = tolerance(t);
  if (sum_like && (t == DType::f32 || t == DType::f64)) {
    double eps = t == DType::f32 ? 6e-8 : 1.1e-16;
    tol.atol += 4 * eps * double(length);
    tol.rtol += 4 * eps * std::sqrt(double(length));
  }
  return tol;
}

#define KILN_REDUCTION_ENTRY(op, label, expr, ...) \
  ReductionOpEntry { op, label, [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return expr; }, __VA_ARGS__ }

const std::vector<ReductionOpEntry>& reduction_op_db() {
  static const std::vector<ReductionOpEntry> db = {
      KILN_REDUCTION_ENTRY("sum", "sum", sum(x, d, k), sum_of),
      KILN_REDUCTION_ENTRY("mean", "mean", mean(x, d, k), mean_of),
      KILN_REDUCTION_ENTRY("max", "max", max(x, d, k), max_of, false),
      KILN_REDUCTION_ENTRY("min", "min", min(x, d, k), min_of, false),
      KILN_REDUCTION_ENTRY("var", "var", var(x, d, 1, k), var_of(1)),
      KILN_REDUCTION_ENTRY("var", "var0", var(x, d, 0, k), var_of(0)),
      KILN_REDUCTION_ENTRY("logsumexp", "logsumexp", logsumexp(x, d, k), logsumexp_of),
  };
  return db;
}

const ReductionOpEntry& reduction_entry(const std::string& label) {
  for (const ReductionOpEntry& e : reduction_op_db())
    if (e.label == label) return e;
  throw std::invalid_argument("no reduction entry " + label);
}

Tolerance RowOpEntry::against_reference(DType t) const {
  Tolerance tol = tolerance(t);
  if (t == DType::f32) tol.atol = 1e-5;
  return tol;
}

Tolerance RowOpEntry::cuda_against_cpu() const { return {1e-4, 1e-4}; }

namespace {

// x of `shape` drawn from [lo, hi), or a view of random_view's `kind` (drawn from [-2, 2)).
Tensor row_input(const Shape& shape, DType t, uint64_t seed, const std::string& kind, double lo, double hi) {
  return kind.empty() ? random_tensor(shape, t, seed, lo, hi) : random_view(shape, t, seed, kind);
}

// softmax or log_softmax over `dim`.
RowOpEntry softmax_entry(const std::string& op, int64_t dim, const std::string& label) {
  bool log = op == "log_softmax";
  return {op,
          label,
          [](const Shape& s, DType t, uint64_t seed, const std::string& kind) {
            return TensorList{row_input(s, t, seed, kind, -4, 4)};
          },
          [log, dim](const TensorList& in) { return log ? log_softmax(in[0], dim) : softmax(in[0], dim); },
          [log, dim](const TensorList& in) { return along_dim(in[0], dim, log ? log_softmax_line : softmax_line); },
          {{3, 5}, {2, 3, 4}, {9, 100}, {300, 257}, {5000, 3}, {16, 40, 30}, {2, 70000}}};
}

// layer_norm over the last `dims` dims of x, with the weight and bias `affine` names ("", "w",
// "b", "wb"), at eps.
RowOpEntry layer_norm_entry(const std::string& label, size_t dims, const std::string& affine, double eps,
                            std::vector<Shape> shapes) {
  auto normalized = [dims](const Shape& s) { return Shape(s.end() - int64_t(dims), s.end()); };
  bool w = affine.find('w') != std::string::npos, b = affine.find('b') != std::string::npos;
  return {"layer_norm",
          label,
          [=](const Shape& s, DType t, uint64_t seed, const std::string& kind) {
            TensorList in{row_input(s, t, seed, kind, -3, 5)};
            in.push_back(w ? random_tensor(normalized(s), t, seed + 1, 0.5, 2) : Tensor());
            in.push_back(b ? random_tensor(normalized(s), t, seed + 2) : Tensor());
            return in;
          },
          [=](const TensorList& in) { return layer_norm(in[0], normalized(in[0].shape()), in[1], in[2], eps); },
          [=](const TensorList& in) {
            return layer_norm_reference(in[0], numel(normalized(in[0].shape())), in[1], in[2], eps);
          },
          std::move(shapes)};
}

}  // namespace

const std::vector<RowOpEntry>& row_op_db() {
  static const std::vector<RowOpEntry> db = [] {
    const std::vector<Shape> rows = {{4, 10}, {2, 3, 8}, {5, 1}, {300, 256}, {64, 3, 700}, {2, 5000}};
    std::vector<RowOpEntry> d = {
        softmax_entry("softmax", -1, "softmax"),
        softmax_entry("softmax", 0, "softmax_dim0"),
        softmax_entry("log_softmax", -1, "log_softmax"),
        softmax_entry("log_softmax", 0, "log_softmax_dim0"),
        layer_norm_entry("layer_norm", 1, "", 1e-5, rows),
        layer_norm_entry("layer_norm_affine", 1, "wb", 1e-5, rows),
        layer_norm_entry("layer_norm_weight", 1, "w", 1e-5, {{4, 10}, {300, 256}}),
        layer_norm_entry("layer_norm_bias_eps", 1, "b", 0.5, {{4, 10}, {300, 256}}),
        layer_norm_entry("layer_norm_two_dims", 2, "wb", 1e-5, {{2, 3, 8}, {4, 10}, {3, 4, 17}}),
    };
    d.push_back({"cross_entropy",
                 "cross_entropy",
                 [](const Shape& s, DType t, uint64_t seed, const std::string& kind) {
                   Tensor logits = row_input(s, t, seed, kind, -5, 5);
                   Shape rows(s.begin(), s.end() - 1);
                   return TensorList{logits, random_tensor(rows, DType::i64, seed + 1, 0, double(s.back()))};
                 },
                 [](const TensorList& in) { return cross_entropy(in[0], in[1]); },
                 [](const TensorList& in) { return std::vector<double>{cross_entropy_reference(in[0], in[1])}; },
                 {{4, 10}, {1, 1}, {1, 5}, {37, 3}, {200, 130}, {3000, 40}, {2, 20000}}});
    return d;
  }();
  return db;
}

std::vector<double> ViewOpEntry::reference(const Tensor& x) const {
  std::vector<double> values = host_values(x), out;
  for_each_index(shape, [&](const std::vector<int64_t>& i) { out.push_back(values[size_t(broadcast_offset(base, source(i)))]); });
  return out;
}

const std::vector<ViewOpEntry>& view_op_db() {
  using I = std::vector<int64_t>;
  using T = const Tensor&;
  const Shape x{2, 3, 4}, y{3, 1, 4, 1};
  static const std::vector<ViewOpEntry> db = {
      {"view", "reshape", x, [](T t) { return t.reshape({6, 4}); }, {6, 4}, [](const I& i) { return I{i[0] / 3, i[0] % 3, i[1]}; }},
      {"view", "view_inferred", x, [](T t) { return t.view({4, -1}); }, {4, 6}, [](const I& i) {
         int64_t f = i[0] * 6 + i[1];
         return I{f / 12, f / 4 % 3, f % 4};
       }, false},
      {"flatten", "flatten", x, [](T t) { return t.flatten(); }, {24}, [](const I& i) { return I{i[0] / 12, i[0] / 4 % 3, i[0] % 4}; }},
      {"flatten", "flatten_from_1", x, [](T t) { return t.flatten(1); }, {2, 12}, [](const I& i) { return I{i[0], i[1] / 4, i[1] % 4}; }},
      {"unflatten", "unflatten", x, [](T t) { return t.unflatten(-1, {2, -1}); }, {2, 3, 2, 2},
       [](const I& i) { return I{i[0], i[1], i[2] * 2 + i[3]}; }},
      {"permute", "permute", x, [](T t) { return t.permute({2, 0, 1}); }, {4, 2, 3}, [](const I& i) { return I{i[1], i[2], i[0]}; }},
      {"permute", "permute_negative_dims", x, [](T t) { return t.permute({-1, -3, -2}); }, {4, 2, 3},
       [](const I& i) { return I{i[1], i[2], i[0]}; }},
      {"transpose", "transpose", x, [](T t) { return t.transpose(0, 2); }, {4, 3, 2}, [](const I& i) { return I{i[2], i[1], i[0]}; }},
      {"transpose", "transpose_negative_dims", x, [](T t) { return t.transpose(-1, -2); }, {2, 4, 3},
       [](const I& i) { return I{i[0], i[2], i[1]}; }},
      {"slice", "slice_step_2", x, [](T t) { return t.slice(2, 1, 4, 2); }, {2, 3, 2}, [](const I& i) { return I{i[0], i[1], 1 + 2 * i[2]}; }},
      {"slice", "slice_negative_start", x, [](T t) { return t.slice(-2, -2, 3); }, {2, 2, 4},
       [](const I& i) { return I{i[0], 1 + i[1], i[2]}; }},
      {"slice", "slice_negative_end", x, [](T t) { return t.slice(1, 0, -1); }, {2, 2, 4}, [](const I& i) { return i; }},
      {"slice", "slice_clamped_end", x, [](T t) { return t.slice(0, 1, 100); }, {1, 3, 4}, [](const I& i) { return I{1, i[1], i[2]}; }},
      {"slice", "narrow", x, [](T t) { return t.narrow(-1, 1, 2); }, {2, 3, 2}, [](const I& i) { return I{i[0], i[1], i[2] + 1}; }},
      {"unsqueeze", "unsqueeze_0", x, [](T t) { return t.unsqueeze(0); }, {1, 2, 3, 4}, [](const I& i) { return I{i[1], i[2], i[3]}; }},
      {"unsqueeze", "unsqueeze_-2", x, [](T t) { return t.unsqueeze(-2); }, {2, 3, 1, 4}, [](const I& i) { return I{i[0], i[1], i[3]}; }},
      {"squeeze", "squeeze", y, [](T t) { return t.squeeze(); }, {3, 4}, [](const I& i) { return I{i[0], 0, i[1], 0}; }},
      {"squeeze", "squeeze_1", y, [](T t) { return t.squeeze(1); }, {3, 4, 1}, [](const I& i) { return I{i[0], 0, i[1], i[2]}; }},
      {"squeeze", "squeeze_-1", y, [](T t) { return t.squeeze(-1); }, {3, 1, 4}, [](const I& i) { return I{i[0], i[1], i[2], 0}; }},
      {"squeeze", "squeeze_of_a_non_1_dim", y, [](T t) { return t.squeeze(0); }, {3, 1, 4, 1}, [](const I& i) { return i; }},
      {"expand", "expand", y, [](T t) { return t.expand({2, 3, 5, 4, 6}); }, {2, 3, 5, 4, 6},
       [](const I& i) { return I{i[1], 0, i[3], 0}; }},
      {"expand", "expand_-1", y, [](T t) { return t.expand({-1, 2, -1, 3}); }, {3, 2, 4, 3}, [](const I& i) { return I{i[0], 0, i[2], 0}; }},
  };
  return db;
}

TensorList MatmulOpEntry::inputs(DType t, uint64_t seed) const {
  TensorList in{random_tensor(a, t, seed, -1, 1), random_tensor(b, t, seed + 1, -1, 1)};
  if (op == "matmul_bias") in.push_back(random_tensor({b[0]}, t, seed + 2, -1, 1));
  return in;
}

Tensor MatmulOpEntry::call(const TensorList& in) const {
  return op == "matmul_bias" ? linear(in[0], in[1], in[2]) : matmul(in[0], in[1]);
}

std::vector<double> MatmulOpEntry::reference(const TensorList& in, Shape* shape) const {
  if (op == "matmul") return matmul_reference(in[0], in[1], shape);
  *shape = in[0].shape();
  shape->back() = in[1].size(0);
  return linear_reference(in[0], in[1], in[2]);
}

Tolerance MatmulOpEntry::against_reference(DType t) const {
  const double k = double(a.back() + 1);
  if (t == DType::f64) return {1e-12, 1e-14 * k};
  if (t == DType::f32) return {1e-5, 1e-6 * k};
  return tolerance(t);
}

const std::vector<MatmulOpEntry>& matmul_op_db() {
  static const std::vector<MatmulOpEntry> db = {
      {"matmul", "dot", {5}, {5}},  // a 0-d result
      {"matmul", "dot_of_one", {1}, {1}},
      {"matmul", "matrix_x_vector", {4, 6}, {6}},
      {"matmul", "vector_x_matrix", {6}, {6, 3}},
      {"matmul", "long_vector_x_matrix", {40}, {40, 70}},
      {"matmul", "one_by_one", {1, 1}, {1, 1}},
      {"matmul", "small", {3, 4}, {4, 5}},
      {"matmul", "whole_tiles", {64, 64}, {64, 64}},
      {"matmul", "tiles", {16, 40}, {40, 96}},
      {"matmul", "odd_edge_tiles", {67, 33}, {33, 45}},
      {"matmul", "k_of_one", {8, 1}, {1, 32}},
      {"matmul", "n_below_a_tile", {9, 7}, {7, 31}},
      {"matmul", "m_below_a_tile", {7, 5}, {5, 100}},
      {"matmul", "one_row", {1, 50}, {50, 300}},
      {"matmul", "several_tasks", {300, 200}, {200, 130}},
      {"matmul", "batched", {2, 3, 4}, {2, 4, 5}},
      {"matmul", "shared_b", {4, 5, 6}, {6, 7}},  // the batch folds into M
      {"matmul", "shared_a", {4, 6}, {2, 6, 3}},
      {"matmul", "broadcast_batch", {2, 1, 5, 6}, {3, 6, 7}},
      {"matmul", "broadcast_batch_both", {3, 1, 9, 40}, {1, 2, 40, 33}},
      {"matmul", "vector_x_batch", {6}, {2, 6, 3}},
      {"matmul", "batch_x_vector", {2, 4, 6}, {6}},
      {"matmul", "broadcast_batch_of_rows", {1, 3, 2}, {4, 1, 2, 35}},
      {"matmul", "batched_tiles", {16, 24, 16}, {16, 16, 40}},
      {"matmul_bias", "linear_of_a_vector", {12}, {33, 12}},
      {"matmul_bias", "linear", {5, 12}, {33, 12}},
      {"matmul_bias", "linear_batched", {2, 3, 12}, {33, 12}},
      {"matmul_bias", "linear_tall", {40, 12}, {33, 12}},
  };
  return db;
}

std::vector<double> CreationOpEntry::reference() const {
  std::vector<double> v;
  for (int64_t i = 0; i < numel(shape); ++i) v.push_back(value(i));
  return v;
}

const std::vector<CreationOpEntry>& creation_op_db() {
  using O = TensorOptions;
  using D = DType;
  const std::vector<D> floats = {D::f32, D::f64, D::f16, D::bf16}, numbers = {D::f32, D::f64, D::i32, D::i64};
  static const std::vector<CreationOpEntry> db = {
      {"full", "full", [](O o) { return full({2, 3, 4}, -2.5, o); }, {2, 3, 4}, [](int64_t) { return -2.5; }, floats},
      {"full", "full_integers", [](O o) { return full({3, 5}, -7, o); }, {3, 5}, [](int64_t) { return -7.0; }, {D::i32, D::i64}},
      {"full", "full_bool_of_nonzero", [](O o) { return full({4}, 5, o); }, {4}, [](int64_t) { return 1.0; }, {D::bool_}},
      {"full", "zeros", [](O o) { return zeros({0}, o); }, {0}, [](int64_t) { return 0.0; }, {D::f32, D::i64}},
      {"full", "ones_0d", [](O o) { return ones({}, o); }, {}, [](int64_t) { return 1.0; }, {D::f32, D::i32, D::bool_}},
      {"arange", "arange", [](O o) { return arange(5, o); }, {5}, [](int64_t i) { return double(i); }, numbers},
      {"arange", "arange_step_3", [](O o) { return arange(2, 11, 3, o); }, {3}, [](int64_t i) { return 2.0 + 3.0 * double(i); }, numbers},
      {"arange", "arange_negative_step", [](O o) { return arange(10, 0, -3, o); }, {4}, [](int64_t i) { return 10.0 - 3.0 * double(i); },
       numbers},
      {"arange", "arange_fractional_step", [](O o) { return arange(1, 0, -0.25, o); }, {4},
       [](int64_t i) { return 1.0 - 0.25 * double(i); }, {D::f32, D::f64}},
      {"arange", "arange_long", [](O o) { return arange(-3, 997, 1, o); }, {1000}, [](int64_t i) { return double(i) - 3; },
       {D::f32, D::f64, D::i32, D::i64}},
      {"linspace", "linspace", [](O o) { return linspace(-1, 2, 7, o); }, {7}, [](int64_t i) { return -1.0 + 0.5 * double(i); }, floats},
      {"linspace", "linspace_of_one", [](O o) { return linspace(3, 5, 1, o); }, {1}, [](int64_t) { return 3.0; }, {D::f32, D::f64}},
      {"linspace", "linspace_long", [](O o) { return linspace(0, 1, 1001, o); }, {1001}, [](int64_t i) { return double(i) / 1000; },
       {D::f32, D::f64}},
  };
  return db;
}

const std::vector<DedicatedSuite>& dedicated_op_suites() {
  static const std::vector<DedicatedSuite> suites = {
      {"gelu_backward", "dsl/test_pointwise.cpp", "gelu_backward("},
      {"softmax_backward", "dsl/test_normalization_backward.cpp", "softmax_backward"},
      {"log_softmax_backward", "dsl/test_normalization_backward.cpp", "log_softmax_backward"},
      {"layer_norm_backward", "dsl/test_normalization_backward.cpp", "layer_norm_backward"},
      {"cross_entropy_backward", "dsl/test_normalization_backward.cpp", "cross_entropy_backward"},
      {"matmul_bias_gelu", "dsl/test_matmul.cpp", "matmul_bias_gelu"},
      {"matmul_gelu_backward", "dsl/test_matmul.cpp", "matmul_gelu_backward"},
      {"matmul_bias_grad", "dsl/test_matmul.cpp", "matmul_bias_grad"},
      {"rand", "dsl/test_creation.cpp", "rand("},
      {"randn", "dsl/test_creation.cpp", "randn("},
      {"randint", "dsl/test_creation.cpp", "randint("},
      {"rand_like", "graph/test_compile.cpp", "rand_like(x)"},
      {"attention", "dsl/test_attention.cpp", "scaled_dot_product_attention("},
      {"attention_backward", "dsl/test_attention.cpp", ".backward()"},
  };
  return suites;
}

}  // namespace kiln::test
