// Reductions over a list of dims (empty list: all dims), with or without keepdim: sum, mean, max,
// min, argmax, var, logsumexp. Attributes: "dims" (int list; argmax takes exactly one), "keepdim"
// (bool), and for var "correction" (int; 1 = unbiased, read through attr_expr so the eager kernel
// takes it at run time).
// Dtypes: sum of integers or bool gives i64, floats keep theirs (f16/bf16 accumulate in f32); mean,
// var and logsumexp are float ops, so integer and bool inputs compute in f32 (the rule of kiln's
// float ops such as exp; PyTorch raises instead); max and min keep the dtype; argmax gives i64, the
// index of the first maximum. Empty reductions follow PyTorch: sum 0, mean and var nan, logsumexp
// -inf, while max, min and argmax have no identity and raise kiln::Error.
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/reduction_math.h"
#include "dsl/ops/runtime_attrs.h"

namespace kiln {

using namespace Halide;

namespace {

enum class Kind { sum, mean, max, min, argmax, var, logsumexp };

DType result_dtype(Kind kind, DType t) {
  switch (kind) {
    case Kind::sum: return is_floating(t) ? t : DType::i64;
    case Kind::max:
    case Kind::min: return t;
    case Kind::argmax: return DType::i64;
    default: return to_floating(t);
  }
}

std::vector<int> reduced_dims(const std::string& op, Kind kind, const Attrs& a, int64_t rank) {
  const auto& dims = a.get<std::vector<int64_t>>("dims");
  if (kind == Kind::argmax)
    KILN_CHECK(dims.size() == 1, op, ": expects exactly one dim, got ", to_string(dims));
  return wrap_dims(op, dims, rank);
}

TensorMeta infer_reduce(const std::string& op, Kind kind, const TensorMeta& x, const Attrs& a) {
  int64_t rank = int64_t(x.shape.size());
  std::vector<int> dims = reduced_dims(op, kind, a, rank);
  bool keepdim = a.get_or<bool>("keepdim", false);
  Shape out;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (reduced) count *= x.shape[d];
    if (!reduced) out.push_back(x.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  bool needs_elements = kind == Kind::max || kind == Kind::min || kind == Kind::argmax;
  KILN_CHECK(!needs_elements || count > 0, op, ": cannot reduce over zero elements (input shape ",
             to_string(x.shape), ", dims ", to_string(a.get<std::vector<int64_t>>("dims")),
             "); ", op, " has no identity");
  return {out, result_dtype(kind, x.dtype), x.device};
}

Type value_type(DType t) { return t == DType::bf16 ? Float(32) : halide_type(t); }

// The reduced result over ix.kept, in its compute type.
Func reduction(Kind kind, const HalideTensor& x, const ReductionIndex& ix, DType out, const Attrs& a) {
  std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
  Func f(Internal::unique_name("result"));
  switch (kind) {
    case Kind::sum: {
      Type acc = is_floating(out) ? float_type(out) : Int(64);
      f(k) = reduce_func(ix, Combine::sum, value_at(x, ix.args, acc), "sum")(k);
      break;
    }
    case Kind::mean: {
      Type t = float_type(out);
      Func total = reduce_func(ix, Combine::sum, value_at(x, ix.args, t), "sum");
      f(k) = total(k) / cast(t, ix.count);
      break;
    }
    case Kind::max:
    case Kind::min: {
      Combine c = kind == Kind::max ? Combine::max : Combine::min;
      f(k) = reduce_func(ix, c, value_at(x, ix.args, value_type(x.dtype)), "extremum")(k);
      break;
    }
    case Kind::argmax: {
      // The first index holding the max: two plain reductions, both vectorizable.
      Expr v = value_at(x, ix.args, value_type(x.dtype));
      Func mx = reduce_func(ix, Combine::max, v, "max");
      Func first = reduce_func(ix, Combine::min, select(v == mx(k), ix.r.x, ix.count), "argmax");
      f(k) = cast(Int(64), first(k));
      break;
    }
    case Kind::var: {
      Type t = float_type(out);
      Moments m = moments(x, ix, t);
      Expr dof = max(cast(t, ix.count) - cast(t, attr_expr(a, "correction")), Internal::make_zero(t));
      f(k) = m.m2(k) / dof;
      break;
    }
    case Kind::logsumexp: f(k) = logsumexp_func(x, ix, float_type(out))(k); break;
  }
  return f;
}

void reduce_op(std::vector<OpDef>& defs, const std::string& name, Kind kind) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::reduction;
  d.family = KernelFamily::reduce;
  d.num_inputs = 1;
  d.differentiable = kind != Kind::argmax;  // an index
  d.compares_with_own_reduction = kind == Kind::argmax;
  // Sums in f32 under autocast; max, min and argmax are exact in any dtype.
  if (kind == Kind::sum || kind == Kind::mean || kind == Kind::var || kind == Kind::logsumexp)
    d.autocast = AutocastRule::f32;
  d.infer = [name, kind](const std::vector<TensorMeta>& in, const Attrs& a) {
    return std::vector<TensorMeta>{infer_reduce(name, kind, in[0], a)};
  };
  d.define = KILN_HALIDE([name, kind](const std::vector<HalideTensor>& in, const Attrs& a) {
    const HalideTensor& x = in[0];
    std::vector<int> dims = reduced_dims(name, kind, a, x.rank());
    ReductionIndex ix(x, dims);
    DType out = result_dtype(kind, x.dtype);
    Func f = reduction(kind, x, ix, out, a);
    std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
    HalideTensor y{Func(Internal::unique_name(name)), ix.kept_shape, out};
    y.func(k) = store_value(f(k), out);
    if (a.get_or<bool>("keepdim", false)) y = keep_dims(y, dims, x.rank());
    return std::vector<HalideTensor>{y};
  });
  defs.push_back(std::move(d));
}

}  // namespace

void KILN_OP_TABLES::add_reduce_ops(std::vector<OpDef>& defs) {
  reduce_op(defs, "sum", Kind::sum);
  reduce_op(defs, "mean", Kind::mean);
  reduce_op(defs, "max", Kind::max);
  reduce_op(defs, "min", Kind::min);
  reduce_op(defs, "argmax", Kind::argmax);
  reduce_op(defs, "var", Kind::var);
  reduce_op(defs, "logsumexp", Kind::logsumexp);
}

}  // namespace kiln
