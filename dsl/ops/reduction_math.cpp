#include "dsl/ops/reduction_math.h"

#include <algorithm>

namespace kiln {

using namespace Halide;

ReductionIndex::ReductionIndex(const HalideTensor& x, const std::vector<int>& reduced)
    : dims(reduced), rank(x.rank()) {
  std::vector<bool> is_reduced(rank, false);
  for (int d : dims) is_reduced[d] = true;
  Region region;
  for (int d = rank - 1; d >= 0; --d)
    if (is_reduced[d]) region.push_back(Range(0, x.shape[d]));
  if (region.empty()) region.push_back(Range(0, 1));
  r = RDom(region, Internal::unique_name("r"));
  args.resize(rank);
  int next = 0;
  count = Expr(1);
  for (int d = rank - 1; d >= 0; --d) {
    int h = rank - 1 - d;
    if (is_reduced[d]) {
      args[h] = r[next++];
      count = count * x.shape[d];
    } else {
      kept.push_back(Var(Internal::unique_name("k")));
      args[h] = kept.back();
    }
  }
  for (int d = 0; d < rank; ++d)
    if (!is_reduced[d]) kept_shape.push_back(x.shape[d]);
}

Func reduce_func(const ReductionIndex& ix, Combine c, Expr value, const std::string& name) {
  Func f(Internal::unique_name(name));
  std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
  Type t = value.type();
  switch (c) {
    case Combine::sum:
      f(k) = Internal::make_zero(t);
      f(k) = f(k) + value;
      break;
    case Combine::max:
      f(k) = t.min();
      f(k) = max(f(k), value);
      break;
    case Combine::min:
      f(k) = t.max();
      f(k) = min(f(k), value);
      break;
  }
  return f;
}

Expr value_at(const HalideTensor& x, const std::vector<Expr>& args, Type t) {
  return cast(t, load_value(x.func(args), x.dtype));
}

std::vector<Expr> kept_args(const std::vector<Expr>& full_args, const std::vector<int>& dims, int rank) {
  std::vector<Expr> k;
  for (int h = 0; h < rank; ++h)
    if (std::find(dims.begin(), dims.end(), rank - 1 - h) == dims.end()) k.push_back(full_args[h]);
  return k;
}

HalideTensor keep_dims(const HalideTensor& reduced, const std::vector<int>& dims, int rank) {
  std::vector<Var> v = halide_vars(rank);
  std::vector<Expr> full(v.begin(), v.end());
  HalideTensor out{Func(Internal::unique_name("keepdim")), {}, reduced.dtype};
  out.func(v) = reduced.func(kept_args(full, dims, rank));
  size_t next = 0;
  for (int d = 0; d < rank; ++d) {
    bool is_reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    out.shape.push_back(is_reduced ? Expr(1) : reduced.shape[next++]);
  }
  return out;
}

Type float_type(DType t) { return t == DType::f64 ? Float(64) : Float(32); }

Moments moments(const HalideTensor& x, const ReductionIndex& ix, Type t) {
  Moments m;
  Func total = reduce_func(ix, Combine::sum, value_at(x, ix.args, t), "sum");
  std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
  m.mean = Func(Internal::unique_name("mean"));
  m.mean(k) = total(k) / cast(t, ix.count);
  Expr dev = value_at(x, ix.args, t) - m.mean(k);
  m.m2 = reduce_func(ix, Combine::sum, dev * dev, "m2");
  return m;
}

LogSumExp logsumexp_parts(const HalideTensor& x, const ReductionIndex& ix, Type t) {
  std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
  LogSumExp p;
  p.max = reduce_func(ix, Combine::max, value_at(x, ix.args, t), "max");
  Func s = reduce_func(ix, Combine::sum, exp(value_at(x, ix.args, t) - p.max(k)), "sumexp");
  p.log_sum = Func(Internal::unique_name("logsum"));
  p.log_sum(k) = log(s(k));
  return p;
}

Func logsumexp_func(const HalideTensor& x, const ReductionIndex& ix, Type t) {
  std::vector<Expr> k(ix.kept.begin(), ix.kept.end());
  LogSumExp p = logsumexp_parts(x, ix, t);
  Func lse(Internal::unique_name("logsumexp"));
  lse(k) = select(is_inf(p.max(k)), p.max(k), p.log_sum(k) + p.max(k));
  return lse;
}

}  // namespace kiln
