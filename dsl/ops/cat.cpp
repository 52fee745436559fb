// cat: concatenation along one dim (stack is unsqueeze + cat, in dsl/api/cat.cpp).
// Shapes must match except in the cat dim; dtypes promote as in binary ops (promote_types over
// all inputs, like torch.cat). As in PyTorch, a 1-D input of shape [0] is skipped whatever the
// rank of the others. The Halide definition selects, for each output index along the dim, the
// input whose range holds it, so a compiled region can fuse cat with its producers and consumers.
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

namespace {

using namespace Halide;

bool skipped_empty(const Shape& s, size_t out_rank) { return out_rank != 1 && s == Shape{0}; }

std::vector<TensorMeta> infer_cat(const std::vector<TensorMeta>& in, const Attrs& a) {
  KILN_CHECK(!in.empty(), "cat: expects at least one tensor, got an empty list");
  Device dev = common_device("cat", in);
  DType t = in[0].dtype;
  for (const TensorMeta& m : in) t = promote_types(t, m.dtype);

  size_t ref = 0;
  while (ref < in.size() && in[ref].shape == Shape{0}) ++ref;
  if (ref == in.size()) return {{{0}, t, dev}};  // only [0] inputs: concatenated 1-D
  const Shape& rs = in[ref].shape;
  KILN_CHECK(!rs.empty(), "cat: input ", ref, " is 0-d (shape []); zero-dimensional tensors cannot be "
             "concatenated (unsqueeze them, or use stack)");
  int d = wrap_dim("cat", a.get<int64_t>("dim"), int64_t(rs.size()));
  Shape out = rs;
  out[d] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    if (skipped_empty(s, rs.size())) continue;
    KILN_CHECK(s.size() == rs.size(), "cat: input ", i, " has shape ", to_string(s), " but input ", ref,
               " has shape ", to_string(rs), "; all inputs need the same rank (cat dim ", d, ")");
    for (size_t k = 0; k < s.size(); ++k)
      KILN_CHECK(int(k) == d || s[k] == rs[k], "cat: input ", i, " has shape ", to_string(s),
                 " but input ", ref, " has shape ", to_string(rs), " (dim ", k, ": ", s[k], " vs ",
                 rs[k], "); sizes must match except in the cat dim ", d);
    out[d] += s[d];
  }
  return {{out, t, dev}};
}

std::vector<HalideTensor> define_cat(const std::vector<HalideTensor>& in, const Attrs& a) {
  int rank = 0;
  DType t = in[0].dtype;
  for (const HalideTensor& x : in) {
    rank = std::max(rank, x.rank());
    t = promote_types(t, x.dtype);
  }
  int d = wrap_dim("cat", a.get<int64_t>("dim"), rank);
  int hd = rank - 1 - d;  // the cat dim among the Func's args (innermost first)
  std::vector<Var> vars = halide_vars(rank);
  std::vector<Expr> args(vars.begin(), vars.end());

  // Inputs that hold data along the dim, with the offset where each one starts.
  std::vector<size_t> parts;
  std::vector<Expr> starts;
  Expr total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].rank() != rank || Internal::is_const_zero(in[i].dim(d))) continue;
    parts.push_back(i);
    starts.push_back(total);
    total = Internal::is_const_zero(total) ? in[i].dim(d) : total + in[i].dim(d);
  }
  auto load = [&](size_t p) {
    const HalideTensor& x = in[parts[p]];
    std::vector<Expr> at = args;
    at[hd] = clamp(args[hd] - starts[p], 0, x.dim(d) - 1);  // in range in every select branch
    Expr v = x.func(at);
    return x.dtype == t ? v : store_value(load_value(v, x.dtype), t);
  };

  Expr value = parts.empty() ? cast(halide_type(t), 0) : load(parts.size() - 1);
  for (size_t p = parts.size() - 1; p-- > 0;) value = select(args[hd] < starts[p + 1], load(p), value);

  HalideTensor out;
  out.func = Func("cat");
  out.func(args) = value;
  for (const HalideTensor& x : in)
    if (x.rank() == rank) {
      out.shape = x.shape;
      break;
    }
  out.shape[d] = total;
  out.dtype = t;
  return {out};
}

}  // namespace

void KILN_OP_TABLES::add_cat_ops(std::vector<OpDef>& defs) {
  OpDef d;
  d.name = "cat";
  d.schedule_class = ScheduleClass::data_movement;
  d.family = KernelFamily::cat;
  d.num_inputs = -1;
  d.infer = infer_cat;
  d.define = KILN_HALIDE(define_cat);
  defs.push_back(std::move(d));
}

}  // namespace kiln
