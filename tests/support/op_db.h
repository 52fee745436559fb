// The op database: for each op, how to call it, an independent reference in double, the input
// domain where it is defined and smooth, and the dtypes it takes, so that every test suite (eager
// against the reference, gradcheck, CUDA against the CPU, compiled against eager) iterates over
// the same entries. tests/dsl/test_op_db.cpp fails when a registered op has no entry here and is
// not listed among the ops that dedicated suites cover (dedicated_op_suites). Held so far: the
// unary pointwise ops (dsl/ops/unary_ops.h and gelu), the binary pointwise ops, the float
// reductions, the row ops (softmax, log_softmax, layer_norm, cross_entropy), the views, the
// matrix products (matmul, a Linear with its bias), the deterministic creation ops, and by sample
// operands where, cast, isfinite, argmax, cat, embedding and its backward, detach and contiguous
// (op_db_samples.cpp).
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln.h"
#include "support/reference.h"

namespace kiln::test {

struct UnaryOpEntry {
  std::string op;     // the registered op
  std::string label;  // the op and its variant ("gelu_tanh")
  std::function<Tensor(const Tensor&)> call;
  std::string code;  // the call as C++ in `x` ("gelu(x, \"tanh\")"), for printed fuzz programs
  std::function<double(double)> reference;
  double lo, hi;            // inputs drawn from [lo, hi]: the op's domain
  double grad_lo, grad_hi;  // where it is smooth (gradcheck's finite differences; the fuzzer
                            // maps its operands into this range)
  bool integers = false;    // defined on every number, also i32 and i64 (results stay integers)
  double f32_atol = 0;      // a looser absolute tolerance in f32 than tolerance(f32), where needed

  // Against the double reference, in dtype t: tolerance(t), loosened where the entry says.
  Tolerance against_reference(DType t) const;
  // On CUDA against the CPU, in f32.
  Tolerance cuda_against_cpu() const;
};

const std::vector<UnaryOpEntry>& unary_op_db();

// A binary pointwise op; it broadcasts. Whether its result is a bool mask and whether it is
// differentiable are its OpDef's (comparison, differentiable).
struct BinaryOpEntry {
  std::string op;
  std::function<Tensor(const Tensor&, const Tensor&)> call;
  std::function<double(double, double)> reference;
  double lhs_lo, lhs_hi, rhs_lo, rhs_hi;  // operands drawn from these ranges
  bool integers = true;                   // also defined on i32 and i64
  double f32_tol = 0;  // CUDA against the CPU in f32, where looser than the default (pow: libm's and
                       // CUDA's differ in the last bits)
  double f16_tol = 0;  // against the double reference in f16, where looser than tolerance(f16)
  // Where the op is smooth enough for finite differences and for comparing gradients, when
  // narrower than the ranges above: {lhs_lo, lhs_hi, rhs_lo, rhs_hi} (pow: away from a base of 0
  // and from large exponents).
  std::optional<std::array<double, 4>> smooth;

  Tolerance against_reference(DType t) const;  // as UnaryOpEntry's
  Tolerance cuda_against_cpu() const;          // exact for a comparison
  // The operand ranges of the gradient checks (gradcheck, the compiled backward): `smooth`, else
  // the value ranges.
  std::array<double, 4> gradient_ranges() const;
};

// A compiled op against the same op run eagerly, in dtype t (f32 or f64): the same math, fused
// and reordered.
Tolerance compiled_against_eager(DType t);

const std::vector<BinaryOpEntry>& binary_op_db();

// A reduction of one input over a list of dims (kiln order, negative from the end; all when empty),
// keepdim either way. Its reference gets one output element's reduced values in row-major order
// (reduction_reference in support/reference.h).
struct ReductionOpEntry {
  std::string op;
  std::string label;  // the op and its variant ("var0": no correction)
  std::function<Tensor(const Tensor&, const std::vector<int64_t>& dims, bool keepdim)> call;
  Reducer reference;
  bool sum_like = true;  // rounding grows with the reduction's length (a sum; max and min are exact)

  // Against the double reference in dtype t, for a reduction of `length` values of about unit size.
  Tolerance against_reference(DType t, int64_t length) const;
};

const std::vector<ReductionOpEntry>& reduction_op_db();
// The entry with this label (test suites that pick one).
const ReductionOpEntry& reduction_entry(const std::string& label);

// A row op: softmax and log_softmax over one dim, layer_norm over the last dims (with or without
// weight and bias), cross_entropy over the classes of (N, C) logits. `inputs` makes the op's
// operands for x of `shape` (x first, then the weight and bias or the targets; x laid out as
// random_view's `kind`, "" for contiguous); `reference` computes the output from them in double.
struct RowOpEntry {
  std::string op;
  std::string label;  // the op and its variant ("softmax_dim0", "layer_norm_affine")
  std::function<TensorList(const Shape& shape, DType t, uint64_t seed, const std::string& kind)> inputs;
  std::function<Tensor(const TensorList& in)> call;
  std::function<std::vector<double>(const TensorList& in)> reference;
  std::vector<Shape> shapes;  // x's shapes for the suites to draw, the first small (gradcheck's)

  // Against the double reference in dtype t: tolerance(t), an absolute 1e-5 in f32 (a
  // log_softmax subtracts values of the row's size; a layer norm divides by a small deviation).
  Tolerance against_reference(DType t) const;
  // On CUDA against the CPU, in f32: the rows summed in another order.
  Tolerance cuda_against_cpu() const;
};

const std::vector<RowOpEntry>& row_op_db();

// A view op: called on an input of shape `base`, it gives a view of `shape` whose index i reads
// the input at source(i) (host index arithmetic, independent of the op's stride rule).
struct ViewOpEntry {
  std::string op;
  std::string label;  // the op and its variant ("slice_step_2")
  Shape base;
  std::function<Tensor(const Tensor&)> call;
  Shape shape;
  std::function<std::vector<int64_t>(const std::vector<int64_t>&)> source;
  bool any_layout = true;  // also of a non-contiguous input (view() is not: it refuses to copy)

  // The view's values in row-major order, read from x (of shape `base`, any layout) at source(i).
  std::vector<double> reference(const Tensor& x) const;
};

const std::vector<ViewOpEntry>& view_op_db();

// A matrix product: matmul(a, b) with operands of shapes a and b ("matmul"), or a Linear with a
// bias (x of shape a, weight of shape b = [N, K], bias [N]: "matmul_bias"). Operands are drawn
// from [-1, 1]; the reference is a double loop.
struct MatmulOpEntry {
  std::string op;
  std::string label;  // what the shapes exercise ("batched", "vector_x_matrix")
  Shape a, b;

  TensorList inputs(DType t, uint64_t seed) const;
  Tensor call(const TensorList& in) const;
  std::vector<double> reference(const TensorList& in, Shape* shape) const;
  // A sum of K products of values in [-1, 1]: the absolute error grows with K.
  Tolerance against_reference(DType t) const;
};

const std::vector<MatmulOpEntry>& matmul_op_db();

// A creation op: call(options) makes a tensor of `shape` in each of `dtypes`, whose element i
// (row-major) is value(i) (exact in integer dtypes, rounded to the dtype in float ones).
struct CreationOpEntry {
  std::string op;
  std::string label;  // the op and its variant ("arange_negative_step")
  std::function<Tensor(TensorOptions)> call;
  Shape shape;
  std::function<double(int64_t i)> value;
  std::vector<DType> dtypes;

  std::vector<double> reference() const;
};

const std::vector<CreationOpEntry>& creation_op_db();

// An op whose operands the entries above do not describe: a mask and two values (where), integer
// indices (embedding, its backward), a target dtype (cast), non-finite values (isfinite), a
// selection (argmax), a list of tensors (cat), or an identity on values (detach, contiguous).
// `inputs` makes its operands with the float ones in dtype t (f32 or f64; the others in their own
// dtypes), `reference` its output from them in double, of `shape` and of dtype `out_dtype(t)`.
struct SampleOpEntry {
  std::string op;
  std::string label;  // the op and its variant ("cast_to_i32")
  std::function<TensorList(DType t, uint64_t seed)> inputs;
  std::function<Tensor(const TensorList& in)> call;
  std::function<std::vector<double>(const TensorList& in)> reference;
  Shape shape;
  std::function<DType(DType t)> out_dtype;  // empty: t
  bool differentiable = false;  // gradients flow to its float operands (gradcheck, compiled backward)
  bool exact = true;            // no rounding: a selection, a copy, a cast to integers

  DType result_dtype(DType t) const { return out_dtype ? out_dtype(t) : t; }
  // Against the double reference: exact, or tolerance() of the result's dtype (the sums of an
  // embedding backward, a cast to f16).
  Tolerance against_reference(DType t) const;
};

const std::vector<SampleOpEntry>& sample_op_db();

// The registered ops the databases do not hold yet, each with the test file (under tests/) whose
// cases cover it; test_op_db checks that the file exists and still contains `evidence` (the call
// that exercises the op).
struct DedicatedSuite {
  std::string op;
  std::string test_file;
  std::string evidence;
};

const std::vector<DedicatedSuite>& dedicated_op_suites();

}  // namespace kiln::test
