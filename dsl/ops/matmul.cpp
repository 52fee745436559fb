// matmul: numpy/PyTorch semantics. 1-D x 1-D is a dot product (0-d result); a 1-D left operand
// is a row (its M dim is dropped from the result), a 1-D right operand a column (N dropped);
// operands of rank > 2 are stacks of matrices whose batch dims broadcast:
//   (B, 1, M, K) x (H, K, N) -> (B, H, M, N).
// Float dtypes only; f16/bf16 accumulate in f32. The Halide definition is the plain sum over K
// for any ranks; the eager generator schedules it as a register-tiled GEMM.
#include "dsl/halide_def.h"
#include "dsl/ops/math_functions.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/reduction_math.h"

namespace kiln {

namespace {

using namespace Halide;

// x's value at `args` in the type the GEMM and its epilogues accumulate in (f64 for f64, else
// f32): reduction_math.h's value_at in its float_type.
Expr widened(const HalideTensor& x, const std::vector<Expr>& args) { return value_at(x, args, float_type(x.dtype)); }

std::vector<Expr> exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

std::vector<TensorMeta> infer_matmul(const std::vector<TensorMeta>& in, const Attrs&) {
  const Shape& a = in[0].shape;
  const Shape& b = in[1].shape;
  Device dev = common_device("matmul", in);
  KILN_CHECK(!a.empty() && !b.empty(), "matmul: both operands need at least 1 dim, got shapes ",
             to_string(a), " and ", to_string(b));
  KILN_CHECK(in[0].dtype == in[1].dtype, "matmul: operands must have the same dtype, got ",
             in[0].dtype, " and ", in[1].dtype, " (shapes ", to_string(a), " and ", to_string(b), ")");
  KILN_CHECK(is_floating(in[0].dtype), "matmul: only floating dtypes (f32, f64, f16, bf16) are "
             "supported, got ", in[0].dtype, " (shapes ", to_string(a), " and ", to_string(b), ")");
  int64_t ka = a.back();
  int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  KILN_CHECK(ka == kb, "matmul: inner dims must match: ", ka, " vs ", kb, " (shapes ", to_string(a),
             " and ", to_string(b), "; the last dim of the first operand must equal the ",
             b.size() == 1 ? "only" : "second-to-last", " dim of the second)");
  Shape batch_a(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  Shape batch_b(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  size_t nb = std::max(batch_a.size(), batch_b.size());
  Shape out(nb);
  for (size_t i = 0; i < nb; ++i) {
    int64_t da = i < nb - batch_a.size() ? 1 : batch_a[i - (nb - batch_a.size())];
    int64_t db = i < nb - batch_b.size() ? 1 : batch_b[i - (nb - batch_b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims ", to_string(batch_a), " and ",
               to_string(batch_b), " do not broadcast (", da, " vs ", db, "; shapes ", to_string(a),
               " and ", to_string(b), ")");
    out[i] = da == 1 ? db : da;
  }
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return {{out, in[0].dtype, dev}};
}

// Index of batch dim `d` (kiln order, counted from the right like broadcasting) of an operand:
// 0 where the operand's extent is 1, so size-1 dims broadcast.
Expr batch_index(const HalideTensor& t, int rank_without_matrix, int d_from_right, Expr out_index) {
  Expr extent = t.shape[rank_without_matrix - 1 - d_from_right];
  return select(extent == 1, 0, out_index);
}

std::vector<HalideTensor> define_matmul(const std::vector<HalideTensor>& in, const Attrs&) {
  const HalideTensor& a = in[0];
  const HalideTensor& b = in[1];
  int ra = a.rank(), rb = b.rank();
  int bra = std::max(ra - 2, 0), brb = std::max(rb - 2, 0), nb = std::max(bra, brb);
  int out_rank = nb + (ra >= 2) + (rb >= 2);
  std::vector<Var> v = halide_vars(out_rank);
  std::vector<Expr> shape;  // kiln order

  int next = 0;
  Expr n = rb >= 2 ? Expr(v[next++]) : Expr(0);
  Expr m = ra >= 2 ? Expr(v[next++]) : Expr(0);
  RDom k(0, a.dim(-1), "k");
  std::vector<Expr> a_args{k}, b_args;
  if (ra >= 2) a_args.push_back(m);
  if (rb >= 2) b_args.push_back(n);
  b_args.push_back(k);
  for (int d = 0; d < nb; ++d) {  // d counts batch dims from the innermost
    Expr i = v[next + d];
    if (d < bra) a_args.push_back(batch_index(a, bra, d, i));
    if (d < brb) b_args.push_back(batch_index(b, brb, d, i));
  }
  for (int d = nb - 1; d >= 0; --d) {
    if (d < bra && d < brb) {
      Expr ea = a.shape[bra - 1 - d], eb = b.shape[brb - 1 - d];
      shape.push_back(select(ea == 1, eb, ea));
    } else {
      shape.push_back(d < bra ? a.shape[bra - 1 - d] : b.shape[brb - 1 - d]);
    }
  }
  if (ra >= 2) shape.push_back(a.dim(-2));
  if (rb >= 2) shape.push_back(b.dim(-1));

  DType t = a.dtype;
  Func acc("matmul");
  acc(v) = cast(float_type(t), 0);
  acc(v) += widened(a, a_args) * widened(b, b_args);
  if (t == DType::f32 || t == DType::f64) return {{acc, shape, t}};
  Func out("matmul_out");
  out(v) = store_value(acc(v), t);
  return {{out, shape, t}};
}

// matmul_bias(a, b, bias) = matmul(a, b) + bias, bias 1-D along the product's last dim (N).
std::vector<TensorMeta> infer_matmul_bias(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  std::vector<TensorMeta> out = infer_matmul({in[0], in[1]}, attrs);
  const Shape& n = out[0].shape;
  KILN_CHECK(!n.empty() && in[2].shape == Shape{n.back()}, "matmul_bias: bias must have shape [", n.empty() ? 0 : n.back(),
             "] (the product's last dim), got ", to_string(in[2].shape), " (product ", to_string(n), ")");
  KILN_CHECK(in[2].dtype == in[0].dtype, "matmul_bias: bias dtype ", in[2].dtype, " differs from the operands' ",
             in[0].dtype);
  common_device("matmul_bias", in);
  return out;
}

std::vector<HalideTensor> define_matmul_bias(const std::vector<HalideTensor>& in, const Attrs& attrs) {
  HalideTensor product = define_matmul({in[0], in[1]}, attrs)[0];
  const HalideTensor& bias = in[2];
  std::vector<Var> v = halide_vars(int(product.shape.size()));
  Func out("matmul_bias");
  out(v) = store_value(widened(product, exprs(v)) + widened(bias, {v[0]}), product.dtype);
  return {{out, product.shape, product.dtype}};
}

// The GEMMs with cuBLASLt's GELU epilogues take GPT-2's tanh form only (cuBLASLt has no other).
void check_tanh_gelu(const std::string& op, const Attrs& attrs) {
  const auto& ap = attrs.get_or<std::string>("approximate", "tanh");
  KILN_CHECK(ap == "tanh", op, ": cuBLASLt's GELU epilogue computes the tanh form; approximate must be 'tanh', got '",
             ap, "'");
}

// matmul_bias_gelu(a, b, bias) = gelu(matmul(a, b) + bias, "tanh"), and with aux = 1 also the
// product plus bias (GELU's input, which its derivative reads).
std::vector<TensorMeta> infer_matmul_bias_gelu(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_tanh_gelu("matmul_bias_gelu", attrs);
  std::vector<TensorMeta> out = infer_matmul_bias(in, attrs);
  if (attrs.get_or<bool>("aux", false)) out.push_back(out[0]);
  return out;
}

std::vector<HalideTensor> define_matmul_bias_gelu(const std::vector<HalideTensor>& in, const Attrs& attrs) {
  HalideTensor pre = define_matmul_bias(in, attrs)[0];
  std::vector<Var> v = halide_vars(int(pre.shape.size()));
  Func out("matmul_bias_gelu");
  out(v) = store_value(gelu_expr(widened(pre, exprs(v)), "tanh"), pre.dtype);
  std::vector<HalideTensor> outs{{out, pre.shape, pre.dtype}};
  if (attrs.get_or<bool>("aux", false)) outs.push_back(pre);
  return outs;
}

// matmul_gelu_backward(a, b, x) = gelu_backward(matmul(a, b), x, "tanh"): the gradient of GELU's
// input x from the gradient of its output, which the product computes.
std::vector<TensorMeta> infer_matmul_gelu_backward(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_tanh_gelu("matmul_gelu_backward", attrs);
  std::vector<TensorMeta> out = infer_matmul({in[0], in[1]}, attrs);
  KILN_CHECK(in[2].shape == out[0].shape && in[2].dtype == out[0].dtype, "matmul_gelu_backward: GELU's input must be ",
             to_string(out[0].shape), " ", out[0].dtype, " (the product's), got ", to_string(in[2].shape), " ",
             in[2].dtype);
  common_device("matmul_gelu_backward", in);
  return out;
}

std::vector<HalideTensor> define_matmul_gelu_backward(const std::vector<HalideTensor>& in, const Attrs& attrs) {
  HalideTensor product = define_matmul({in[0], in[1]}, attrs)[0];
  const HalideTensor& x = in[2];
  std::vector<Var> v = halide_vars(int(product.shape.size()));
  Func out("matmul_gelu_backward");
  out(v) = store_value(widened(product, exprs(v)) * gelu_grad_expr(widened(x, exprs(v)), "tanh"), product.dtype);
  return {{out, product.shape, product.dtype}};
}

// matmul_bias_grad(a, b) = {a @ b, a summed along its last dim}: for a 2-D a [M, K], the bias
// gradient [M] of a Linear whose weight gradient the product is (a = dy^T, K the tokens).
std::vector<TensorMeta> infer_matmul_bias_grad(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  KILN_CHECK(in[0].shape.size() == 2 && in[1].shape.size() == 2, "matmul_bias_grad: operands must be 2-D, got ",
             to_string(in[0].shape), " and ", to_string(in[1].shape));
  std::vector<TensorMeta> out = infer_matmul(in, attrs);
  out.push_back({Shape{in[0].shape[0]}, out[0].dtype, out[0].device});
  return out;
}

std::vector<HalideTensor> define_matmul_bias_grad(const std::vector<HalideTensor>& in, const Attrs& attrs) {
  HalideTensor product = define_matmul(in, attrs)[0];
  const HalideTensor& a = in[0];
  Var i("i");
  RDom k(0, a.shape[1], "k");
  Func acc("matmul_bias_grad_sum"), out("matmul_bias_grad");
  acc(i) = cast(float_type(a.dtype), 0);
  acc(i) += widened(a, {k.x, i});
  out(i) = store_value(acc(i), a.dtype);
  return {product, {out, {a.shape[0]}, a.dtype}};
}

}  // namespace

void KILN_OP_TABLES::add_matmul_ops(std::vector<OpDef>& defs) {
  OpDef d;
  d.name = "matmul";
  d.schedule_class = ScheduleClass::matmul;
  d.family = KernelFamily::matmul;
  d.gemm = true;
  d.num_inputs = 2;
  d.infer = infer_matmul;
  d.define = KILN_HALIDE(define_matmul);
  d.autocast = AutocastRule::lower_precision;
  defs.push_back(d);
  // The product with its bias added in cuBLASLt's epilogue: made on CUDA by a compile pass
  // (graph/passes.h: cublas_bias_epilogue) after differentiation, so it needs no derivative.
  d.name = "matmul_bias";
  d.num_inputs = 3;
  d.infer = infer_matmul_bias;
  d.define = KILN_HALIDE(define_matmul_bias);
  d.differentiable = false;
  d.autocast = AutocastRule::none;  // made after autocast's casts, from a product already cast
  defs.push_back(d);
  // The product with its bias and GELU (tanh form) in cuBLASLt's epilogue, and GELU's backward in
  // the epilogue of the product that computes the gradient of GELU's output: made on CUDA by the
  // compile pass cublas_gelu_epilogues (graph/passes.h) after differentiation.
  d.name = "matmul_bias_gelu";
  d.infer = infer_matmul_bias_gelu;
  d.define = KILN_HALIDE(define_matmul_bias_gelu);
  defs.push_back(d);
  d.name = "matmul_gelu_backward";
  d.infer = infer_matmul_gelu_backward;
  d.define = KILN_HALIDE(define_matmul_gelu_backward);
  defs.push_back(d);
  // A Linear's weight gradient with its bias gradient summed in cuBLASLt's epilogue (BGRADB): made
  // on CUDA by the compile pass cublas_bias_grad_epilogues (graph/passes.h).
  d.name = "matmul_bias_grad";
  d.num_inputs = 2;
  d.infer = infer_matmul_bias_grad;
  d.define = KILN_HALIDE(define_matmul_bias_grad);
  defs.push_back(std::move(d));
}

}  // namespace kiln
