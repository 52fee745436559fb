// Normalizations, each one table entry whose Halide definition reduces along rows:
//   softmax(x, "dim"), log_softmax(x, "dim"): stable, (x - max) - log(sum(exp(x - max)));
//   layer_norm(x[, weight, bias], "normalized_shape", "eps"): over the last len(normalized_shape)
//     dims with the biased variance, like PyTorch; weight and bias come together or not at all (the
//     public function fills in the missing one); eps is read through attr_expr (run time in eager);
//   cross_entropy(logits (N, C) or (C), targets (N) or () of i64): the mean of
//     -log_softmax(row)[target], a 0-d tensor. Targets are clamped inside the kernel; the eager
//     runner checks them against [0, C) on the host first.
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
  d.define = [name, log_space](const std::vector<HalideTensor>& in, const Attrs& a) {
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
  };
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
  return {{{}, to_floating(logits.dtype), logits.device}};
}

std::vector<HalideTensor> define_cross_entropy(const std::vector<HalideTensor>& in, const Attrs&) {
  const HalideTensor &x = in[0], &targets = in[1];
  int rank = x.rank();
  DType out = to_floating(x.dtype);
  Type t = float_type(out);
  ReductionIndex rows(x, {rank - 1});
  LogSumExp lse = logsumexp_parts(x, rows, t);
  std::vector<Var> n = halide_vars(rank - 1);
  std::vector<Expr> row(n.begin(), n.end());
  Expr cls = clamp(cast(Int(32), load_value(targets.func(row), targets.dtype)), 0, x.dim(-1) - 1);
  std::vector<Expr> picked = row;
  picked.insert(picked.begin(), cls);
  HalideTensor loss{Func(Internal::unique_name("loss")), {}, out};
  loss.func(n) = strict_float(lse.log_sum(row) - (value_at(x, picked, t) - lse.max(row)));
  if (rank == 2) loss.shape.push_back(x.dim(0));
  ReductionIndex all(loss, rank == 2 ? std::vector<int>{0} : std::vector<int>{});
  Func total = reduce_func(all, Combine::sum, loss.func(all.args), "total");
  HalideTensor result{Func(Internal::unique_name("cross_entropy")), {}, out};
  result.func() = store_value(total() / cast(t, all.count), out);
  return {result};
}

}  // namespace

void add_normalization_ops(std::vector<OpDef>& defs) {
  rows_op(defs, "softmax", false);
  rows_op(defs, "log_softmax", true);

  OpDef ln;
  ln.name = "layer_norm";
  ln.schedule_class = ScheduleClass::normalization;
  ln.family = KernelFamily::layer_norm;
  ln.num_inputs = -1;
  ln.infer = infer_layer_norm;
  ln.define = define_layer_norm;
  defs.push_back(std::move(ln));

  OpDef ce;
  ce.name = "cross_entropy";
  ce.schedule_class = ScheduleClass::normalization;
  ce.family = KernelFamily::cross_entropy;
  ce.num_inputs = 2;
  ce.infer = infer_cross_entropy;
  ce.define = define_cross_entropy;
  defs.push_back(std::move(ce));
}

}  // namespace kiln
