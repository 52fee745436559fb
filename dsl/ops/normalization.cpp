// Normalizations, each one table entry whose Halide definition reduces along rows:
//   softmax(x, "dim"), log_softmax(x, "dim"): stable, (x - max) - log(sum(exp(x - max)));
//   layer_norm(x[, weight, bias], "normalized_shape", "eps"): over the last len(normalized_shape)
//     dims with the biased variance, like PyTorch; weight and bias come together or not at all (the
//     public function fills in the missing one); eps is read through attr_expr (run time in eager);
//   cross_entropy(logits (N, C) or (C), targets (N) or () of i64): the mean of
//     lse(row) - row[target], a 0-d tensor, and each row's log-sum-exp lse (N) or () for the
//     backward. Targets are clamped inside the kernel; the eager runner checks them against
//     [0, C) on the host first.
// and the fused backward of each, which eager autograd runs as one kernel where the composite
// took several (a compiled backward keeps the composite: its primitives fuse with their
// neighbours): softmax_backward(y, dy, "dim") = y * (dy - sum(dy * y)),
// log_softmax_backward(y, dy, "dim") = dy - exp(y) * sum(dy), layer_norm_backward(x, dy[, weight],
// "normalized_shape", "eps") = the input's gradient (mean and 1/std recomputed from x), and
// cross_entropy_backward(logits, targets, lse, g) = (exp(logits - lse) - one_hot(targets)) * g / N
// (a target outside [0, C) picks no class). They have no derivative themselves.
// Integer and bool inputs compute in f32, like kiln's other float ops.
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/reduction_math.h"
#include "dsl/ops/runtime_attrs.h"

namespace kiln {

using namespace Halide;

namespace {

std::vector<int> row_dim(const std::string& op, const Attrs& a, int rank) {
  int d = wrap_dim(op, a.get<int64_t>("dim"), rank);
  return rank == 0 ? std::vector<int>{} : std::vector<int>{d};
}

void rows_op(std::vector<OpDef>& defs, const std::string& name, bool log_space) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::normalization;
  d.family = KernelFamily::rows;
  d.num_inputs = 1;
  d.infer = [name](const std::vector<TensorMeta>& in, const Attrs& a) {
    row_dim(name, a, int(in[0].shape.size()));
    return std::vector<TensorMeta>{{in[0].shape, to_floating(in[0].dtype), in[0].device}};
  };
  d.define = KILN_HALIDE([name, log_space](const std::vector<HalideTensor>& in, const Attrs& a) {
    const HalideTensor& x = in[0];
    std::vector<int> dims = row_dim(name, a, x.rank());
    DType out = to_floating(x.dtype);
    Type t = float_type(out);
    ReductionIndex ix(x, dims);
    LogSumExp lse = logsumexp_parts(x, ix, t);
    std::vector<Var> v = halide_vars(x.rank());
    std::vector<Expr> args(v.begin(), v.end());
    std::vector<Expr> row = kept_args(args, dims, x.rank());
    // Strict: fast-math would reassociate into x - (max + log_sum), rounding at the size of x.
    Expr shifted = strict_float((value_at(x, args, t) - lse.max(row)) - lse.log_sum(row));
    HalideTensor y{Func(Internal::unique_name(name)), x.shape, out};
    y.func(v) = store_value(log_space ? shifted : exp(shifted), out);
    return std::vector<HalideTensor>{y};
  });
  d.autocast = AutocastRule::f32;
  defs.push_back(std::move(d));
}

// softmax_backward / log_softmax_backward: y (the forward's output) and dy of one shape.
void rows_backward_op(std::vector<OpDef>& defs, const std::string& name, bool log_space) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::normalization;
  d.family = KernelFamily::rows;
  d.num_inputs = 2;
  d.differentiable = false;
  d.infer = [name](const std::vector<TensorMeta>& in, const Attrs& a) {
    common_device(name, in);
    KILN_CHECK(in[0].shape == in[1].shape, name, ": the output ", to_string(in[0].shape), " and its gradient ",
               to_string(in[1].shape), " must have one shape");
    row_dim(name, a, int(in[0].shape.size()));
    return std::vector<TensorMeta>{{in[0].shape, to_floating(in[0].dtype), in[0].device}};
  };
  d.define = KILN_HALIDE([name, log_space](const std::vector<HalideTensor>& in, const Attrs& a) {
    const HalideTensor &y = in[0], &dy = in[1];
    std::vector<int> dims = row_dim(name, a, y.rank());
    DType out = to_floating(y.dtype);
    Type t = float_type(out);
    ReductionIndex ix(y, dims);
    Expr summed = log_space ? value_at(dy, ix.args, t) : value_at(dy, ix.args, t) * value_at(y, ix.args, t);
    Func s = reduce_func(ix, Combine::sum, summed, "sum");
    std::vector<Var> v = halide_vars(y.rank());
    std::vector<Expr> args(v.begin(), v.end());
    std::vector<Expr> row = kept_args(args, dims, y.rank());
    Expr yv = value_at(y, args, t), g = value_at(dy, args, t);
    HalideTensor dx{Func(Internal::unique_name(name)), y.shape, out};
    dx.func(v) = store_value(log_space ? g - exp(yv) * s(row) : yv * (g - s(row)), out);
    return std::vector<HalideTensor>{dx};
  });
  defs.push_back(std::move(d));
}

std::vector<TensorMeta> infer_layer_norm(const std::vector<TensorMeta>& in, const Attrs& a) {
  KILN_CHECK(in.size() == 1 || in.size() == 3, "layer_norm: expected 1 input or 3 (x, weight, bias), got ",
             in.size());
  const TensorMeta& x = in[0];
  const Shape& ns = a.get<std::vector<int64_t>>("normalized_shape");
  KILN_CHECK(!ns.empty(), "layer_norm: normalized_shape must not be empty");
  bool suffix = ns.size() <= x.shape.size() && std::equal(ns.begin(), ns.end(), x.shape.end() - ns.size());
  KILN_CHECK(suffix, "layer_norm: input shape ", to_string(x.shape), " does not end with normalized_shape ",
             to_string(ns));
  for (size_t i = 1; i < in.size(); ++i) {
    KILN_CHECK(in[i].shape == ns, "layer_norm: ", i == 1 ? "weight" : "bias", " shape ", to_string(in[i].shape),
               " must equal normalized_shape ", to_string(ns));
    KILN_CHECK(in[i].device == x.device, "layer_norm: ", i == 1 ? "weight" : "bias", " is on ", in[i].device,
               " but the input is on ", x.device);
  }
  return {{x.shape, to_floating(x.dtype), x.device}};
}

std::vector<HalideTensor> define_layer_norm(const std::vector<HalideTensor>& in, const Attrs& a) {
  const HalideTensor& x = in[0];
  int k = int(a.get<std::vector<int64_t>>("normalized_shape").size());
  std::vector<int> dims;
  for (int d = x.rank() - k; d < x.rank(); ++d) dims.push_back(d);
  DType out = to_floating(x.dtype);
  Type t = float_type(out);
  ReductionIndex ix(x, dims);
  Moments m = moments(x, ix, t);
  std::vector<Var> v = halide_vars(x.rank());
  std::vector<Expr> args(v.begin(), v.end());
  std::vector<Expr> row = kept_args(args, dims, x.rank());
  std::vector<Expr> kept(ix.kept.begin(), ix.kept.end());
  Func rstd(Internal::unique_name("rstd"));
  rstd(kept) = Internal::make_one(t) / sqrt(m.m2(kept) / cast(t, ix.count) + cast(t, attr_expr(a, "eps")));
  Expr y = strict_float(value_at(x, args, t) - m.mean(row)) * rstd(row);
  if (in.size() == 3) {
    std::vector<Expr> normalized(args.begin(), args.begin() + k);
    y = y * value_at(in[1], normalized, t) + value_at(in[2], normalized, t);
  }
  HalideTensor result{Func(Internal::unique_name("layer_norm")), x.shape, out};
  result.func(v) = store_value(y, out);
  return {result};
}

std::vector<TensorMeta> infer_layer_norm_backward(const std::vector<TensorMeta>& in, const Attrs& a) {
  KILN_CHECK(in.size() == 2 || in.size() == 3, "layer_norm_backward: expected 2 inputs or 3 (x, dy, weight), got ",
             in.size());
  common_device("layer_norm_backward", in);
  KILN_CHECK(in[1].shape == in[0].shape, "layer_norm_backward: the gradient ", to_string(in[1].shape),
             " must have the input's shape ", to_string(in[0].shape));
  std::vector<TensorMeta> forward{in[0]};
  if (in.size() == 3) forward.insert(forward.end(), {in[2], in[2]});
  return infer_layer_norm(forward, a);
}

// The gradient of layer_norm's input: with xhat = (x - mean) * rstd and gxhat = dy (* weight),
// rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)), each mean over the normalized dims.
std::vector<HalideTensor> define_layer_norm_backward(const std::vector<HalideTensor>& in, const Attrs& a) {
  const HalideTensor &x = in[0], &dy = in[1];
  int k = int(a.get<std::vector<int64_t>>("normalized_shape").size());
  std::vector<int> dims;
  for (int d = x.rank() - k; d < x.rank(); ++d) dims.push_back(d);
  DType out = to_floating(x.dtype);
  Type t = float_type(out);
  ReductionIndex ix(x, dims);
  Moments m = moments(x, ix, t);
  std::vector<Expr> kept(ix.kept.begin(), ix.kept.end());
  Func rstd(Internal::unique_name("rstd"));
  rstd(kept) = Internal::make_one(t) / sqrt(m.m2(kept) / cast(t, ix.count) + cast(t, attr_expr(a, "eps")));
  // xhat and gxhat at an element `args` whose row is `row`.
  auto xhat = [&](const std::vector<Expr>& args, const std::vector<Expr>& row) {
    return strict_float(value_at(x, args, t) - m.mean(row)) * rstd(row);
  };
  auto gxhat = [&](const std::vector<Expr>& args) {
    Expr g = value_at(dy, args, t);
    if (in.size() == 3) g = g * value_at(in[2], std::vector<Expr>(args.begin(), args.begin() + k), t);
    return g;
  };
  Func sum_g = reduce_func(ix, Combine::sum, gxhat(ix.args), "sum_g");
  Func sum_gx = reduce_func(ix, Combine::sum, gxhat(ix.args) * xhat(ix.args, kept), "sum_gx");
  std::vector<Var> v = halide_vars(x.rank());
  std::vector<Expr> args(v.begin(), v.end());
  std::vector<Expr> row = kept_args(args, dims, x.rank());
  Expr n = cast(t, ix.count);
  Expr dx = rstd(row) * (gxhat(args) - sum_g(row) / n - xhat(args, row) * (sum_gx(row) / n));
  HalideTensor result{Func(Internal::unique_name("layer_norm_backward")), x.shape, out};
  result.func(v) = store_value(dx, out);
  return {result};
}

std::vector<TensorMeta> infer_cross_entropy(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta &logits = in[0], &targets = in[1];
  common_device("cross_entropy", in);
  KILN_CHECK(logits.shape.size() == 1 || logits.shape.size() == 2,
             "cross_entropy: logits must have shape (N, C) or (C), got ", to_string(logits.shape));
  KILN_CHECK(targets.dtype == DType::i64, "cross_entropy: targets must be class indices of dtype i64, got ",
             targets.dtype);
  Shape want = logits.shape.size() == 2 ? Shape{logits.shape[0]} : Shape{};
  KILN_CHECK(targets.shape == want, "cross_entropy: targets of shape ", to_string(targets.shape),
             " do not match logits of shape ", to_string(logits.shape), " (expected ", to_string(want), ")");
  DType t = to_floating(logits.dtype);
  return {{{}, t, logits.device}, {want, t, logits.device}};
}

// The mean loss and each row's log-sum-exp, which the backward reads instead of reducing the
// logits again (a [8192, 50304] row pass is a millisecond on an H200).
std::vector<HalideTensor> define_cross_entropy(const std::vector<HalideTensor>& in, const Attrs&) {
  const HalideTensor &x = in[0], &targets = in[1];
  int rank = x.rank();
  DType out = to_floating(x.dtype);
  Type t = float_type(out);
  ReductionIndex rows(x, {rank - 1});
  std::vector<Var> n = halide_vars(rank - 1);
  std::vector<Expr> row(n.begin(), n.end());
  HalideTensor lse{logsumexp_func(x, rows, t), {}, t == Float(64) ? DType::f64 : DType::f32};
  if (rank == 2) lse.shape.push_back(x.dim(0));
  Expr cls = clamp(cast(Int(32), load_value(targets.func(row), targets.dtype)), 0, x.dim(-1) - 1);
  std::vector<Expr> picked = row;
  picked.insert(picked.begin(), cls);
  HalideTensor loss{Func(Internal::unique_name("loss")), lse.shape, out};
  loss.func(n) = strict_float(lse.func(row) - value_at(x, picked, t));
  ReductionIndex all(loss, rank == 2 ? std::vector<int>{0} : std::vector<int>{});
  Func total = reduce_func(all, Combine::sum, loss.func(all.args), "total");
  HalideTensor result{Func(Internal::unique_name("cross_entropy")), {}, out};
  result.func() = store_value(total() / cast(t, all.count), out);
  HalideTensor row_lse{Func(Internal::unique_name("row_logsumexp")), lse.shape, out};
  row_lse.func(n) = store_value(lse.func(row), out);
  return {result, row_lse};
}

std::vector<TensorMeta> infer_cross_entropy_backward(const std::vector<TensorMeta>& in, const Attrs& a) {
  std::vector<TensorMeta> forward = infer_cross_entropy({in[0], in[1]}, a);
  KILN_CHECK(in[2].shape == forward[1].shape, "cross_entropy_backward: the rows' log-sum-exp ",
             to_string(in[2].shape), " must have shape ", to_string(forward[1].shape));
  KILN_CHECK(in[3].shape.empty(), "cross_entropy_backward: the loss gradient must be 0-d, got ",
             to_string(in[3].shape));
  common_device("cross_entropy_backward", in);
  return {{in[0].shape, to_floating(in[0].dtype), in[0].device}};
}

// (exp(x - lse) - one_hot(target)) * g / N, one element at a time from the forward's lse.
std::vector<HalideTensor> define_cross_entropy_backward(const std::vector<HalideTensor>& in, const Attrs&) {
  const HalideTensor &x = in[0], &targets = in[1], &lse = in[2], &g = in[3];
  int rank = x.rank();
  DType out = to_floating(x.dtype);
  Type t = float_type(out);
  std::vector<Var> v = halide_vars(rank);
  std::vector<Expr> args(v.begin(), v.end()), row(args.begin() + 1, args.end());
  Expr p = exp(strict_float(value_at(x, args, t) - value_at(lse, row, t)));
  Expr target = load_value(targets.func(row), targets.dtype);
  Expr hit = select(cast(Int(64), args[0]) == cast(Int(64), target), Internal::make_one(t), Internal::make_zero(t));
  Expr count = rank == 2 ? cast(t, x.dim(0)) : Internal::make_one(t);
  HalideTensor dx{Func(Internal::unique_name("cross_entropy_backward")), x.shape, out};
  dx.func(v) = store_value((p - hit) * (value_at(g, {}, t) / count), out);
  return {dx};
}

}  // namespace

void KILN_OP_TABLES::add_normalization_ops(std::vector<OpDef>& defs) {
  rows_op(defs, "softmax", false);
  rows_op(defs, "log_softmax", true);
  rows_backward_op(defs, "softmax_backward", false);
  rows_backward_op(defs, "log_softmax_backward", true);

  OpDef ln;
  ln.name = "layer_norm";
  ln.schedule_class = ScheduleClass::normalization;
  ln.family = KernelFamily::layer_norm;
  ln.num_inputs = -1;
  ln.infer = infer_layer_norm;
  ln.define = KILN_HALIDE(define_layer_norm);
  ln.autocast = AutocastRule::f32;
  defs.push_back(std::move(ln));

  OpDef lnb;
  lnb.name = "layer_norm_backward";
  lnb.schedule_class = ScheduleClass::normalization;
  lnb.family = KernelFamily::layer_norm;
  lnb.num_inputs = -1;
  lnb.differentiable = false;
  lnb.infer = infer_layer_norm_backward;
  lnb.define = KILN_HALIDE(define_layer_norm_backward);
  defs.push_back(std::move(lnb));

  OpDef ce;
  ce.name = "cross_entropy";
  ce.schedule_class = ScheduleClass::normalization;
  ce.family = KernelFamily::cross_entropy;
  ce.host_checked = true;
  ce.num_inputs = 2;
  ce.infer = infer_cross_entropy;
  ce.define = KILN_HALIDE(define_cross_entropy);
  ce.autocast = AutocastRule::f32;
  defs.push_back(std::move(ce));

  OpDef ceb;
  ceb.name = "cross_entropy_backward";
  ceb.schedule_class = ScheduleClass::normalization;
  ceb.family = KernelFamily::cross_entropy;
  ceb.host_checked = true;
  ceb.num_inputs = 4;
  ceb.differentiable = false;
  ceb.infer = infer_cross_entropy_backward;
  ceb.define = KILN_HALIDE(define_cross_entropy_backward);
  defs.push_back(std::move(ceb));
}

}  // namespace kiln
