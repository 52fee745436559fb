// matmul: numpy/PyTorch semantics. 1-D x 1-D is a dot product (0-d result); a 1-D left operand
// is a row (its M dim is dropped from the result), a 1-D right operand a column (N dropped);
// operands of rank > 2 are stacks of matrices whose batch dims broadcast:
//   (B, 1, M, K) x (H, K, N) -> (B, H, M, N).
// Float dtypes only; f16/bf16 accumulate in f32. The Halide definition is the plain sum over K
// for any ranks; the eager generator schedules it as a register-tiled GEMM.
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

namespace {

using namespace Halide;

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
  Type acc_t = t == DType::f64 ? Float(64) : Float(32);
  Func acc("matmul");
  acc(v) = cast(acc_t, 0);
  acc(v) += cast(acc_t, load_value(a.func(a_args), t)) * cast(acc_t, load_value(b.func(b_args), t));
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
  DType t = product.dtype;
  Type acc_t = t == DType::f64 ? Float(64) : Float(32);
  Func out("matmul_bias");
  out(v) = store_value(cast(acc_t, load_value(product.func(v), t)) + cast(acc_t, load_value(bias.func(v[0]), t)), t);
  return {{out, product.shape, t}};
}

}  // namespace

void add_matmul_ops(std::vector<OpDef>& defs) {
  OpDef d;
  d.name = "matmul";
  d.schedule_class = ScheduleClass::matmul;
  d.family = KernelFamily::matmul;
  d.num_inputs = 2;
  d.infer = infer_matmul;
  d.define = define_matmul;
  d.autocast = AutocastRule::lower_precision;
  defs.push_back(d);
  // The product with its bias added in cuBLASLt's epilogue: made on CUDA by a compile pass
  // (graph/passes.h: cublas_bias_epilogue) after differentiation, so it needs no derivative.
  d.name = "matmul_bias";
  d.num_inputs = 3;
  d.infer = infer_matmul_bias;
  d.define = define_matmul_bias;
  d.differentiable = false;
  d.autocast = AutocastRule::none;  // made after autocast's casts, from a product already cast
  defs.push_back(std::move(d));
}

}  // namespace kiln
