#include "schedules/tuple_outputs.h"

#include <algorithm>
#include <set>

#include "schedules/schedule_roots.h"

namespace kiln {

using namespace Halide;

namespace {

bool materialized(const LoweredRegion& l, const Func& f) {
  return std::any_of(l.materialized.begin(), l.materialized.end(), [&](const Func& m) { return m.name() == f.name(); });
}

void drop_materialized(LoweredRegion& l, const Func& f) {
  l.materialized.erase(std::remove_if(l.materialized.begin(), l.materialized.end(),
                                      [&](const Func& m) { return m.name() == f.name(); }),
                       l.materialized.end());
}

// Whether output value v can be an element of a Tuple of pointwise outputs: an f32 pointwise value
// on CUDA (not a copy, which may read through a view), stored by its own Func as the pipeline's
// output k, not a GEMM's result nor a reduction's epilogue.
bool stored_pointwise(const Graph& g, const LoweredRegion& l, size_t k) {
  int v = l.output_values[k];
  const Value& val = g.values[size_t(v)];
  if (!val.meta.device.is_cuda() || val.meta.dtype != DType::f32 || val.sym.empty() || val.producer < 0) return false;
  const GraphNode& n = g.nodes[size_t(val.producer)];
  if (!is_elementwise(n) || l.reduction_epilogues.count(v)) return false;
  for (const LoweredGemm& gemm : l.gemms)
    if (gemm.root == v) return false;
  return l.outputs[k].name() == l.values.at(v).func.name();
}

// The row op whose result output b casts (under autocast, a layer norm's output is cast to bf16
// for the next product), fused into b's Func (lower_region's fused_row_ops); -1 when none.
int cast_row_op(const Graph& g, const LoweredRegion& l, int b) {
  const GraphNode& n = g.nodes[size_t(g.values[size_t(b)].producer)];
  if (n.op->name != "cast" || n.inputs.size() != 1) return -1;
  int u = n.inputs[0];
  int p = g.values[size_t(u)].producer;
  if (p < 0 || g.nodes[size_t(p)].op->schedule_class != ScheduleClass::normalization || !l.values.count(u) ||
      !l.fused_row_ops.count(l.values.at(u).func.name()))
    return -1;
  return p;
}

// Whether region outputs k and k + 1, a and b, are computed together: see the header.
bool pairs(const Graph& g, const Region& r, const LoweredRegion& l, size_t k) {
  int a = l.output_values[k], b = l.output_values[k + 1];
  const Value& vb = g.values[size_t(b)];
  if (!stored_pointwise(g, l, k) || vb.sym != g.values[size_t(a)].sym || vb.producer < 0 ||
      l.outputs[k + 1].name() != l.values.at(b).func.name() || l.reduction_epilogues.count(b))
    return false;
  const int cast_of = cast_row_op(g, l, b);
  const int row_op = cast_of >= 0 ? cast_of : vb.producer;
  if (cast_of < 0 && vb.meta.dtype != DType::f32) return false;
  const GraphNode& nb = g.nodes[size_t(row_op)];
  if (nb.op->schedule_class != ScheduleClass::normalization || reduction_kind(g, nb.outputs[0]) != Reduces::rows)
    return false;
  for (int n : r.nodes)  // the row op is a's one reader in the region
    if (n != row_op && std::count(g.nodes[size_t(n)].inputs.begin(), g.nodes[size_t(n)].inputs.end(), a)) return false;
  if (std::find(nb.inputs.begin(), nb.inputs.end(), a) == nb.inputs.end()) return false;
  if (cast_of >= 0) return true;  // the row op is fused into b's Func, which is stored as an output
  // An output computed over an input's memory (in_place.h) is still safe: each element of the
  // pair reads the inputs at its own position only, and a row's reductions read the row before
  // the row is written.
  for (const LoweredGemm& gemm : l.gemms)
    if (gemm.root == b) return false;
  // The row op is stored (not fused into a reader of its row).
  const Func& fb = l.values.at(b).func;
  return materialized(l, fb) && !l.fused_row_ops.count(fb.name());
}

// Whether every reader of v in region r leads only into `members`: it makes a member, or it is a
// pointwise op (inlined, not stored) whose value does so in turn. Then no other kernel of the
// pipeline reads a member, which, once inlined into the Tuple, would be computed again from the
// inputs, some of which the Tuple may have overwritten (in_place.h).
bool feeds_only(const Graph& g, const Region& r, const LoweredRegion& l, int v, const std::set<int>& members) {
  for (int n : r.nodes) {
    const GraphNode& node = g.nodes[size_t(n)];
    if (!std::count(node.inputs.begin(), node.inputs.end(), v)) continue;
    int out = node.outputs[0];
    if (members.count(out)) continue;
    if (!is_elementwise(node) || std::count(r.outputs.begin(), r.outputs.end(), out) ||
        (l.values.count(out) && materialized(l, l.values.at(out).func)) || !feeds_only(g, r, l, out, members))
      return false;
  }
  return true;
}

// Replaces outputs [k, k + count) with one Tuple-valued Func of them, scheduled as `value`.
void make_tuple(LoweredRegion& l, size_t k, size_t count, int value) {
  std::vector<Func> fs(l.outputs.begin() + std::ptrdiff_t(k), l.outputs.begin() + std::ptrdiff_t(k + count));
  std::vector<Var> vars = pure_vars(fs.back());
  std::string name = fs.back().name();
  std::vector<Expr> elements;
  for (size_t i = 0; i + 1 < fs.size(); ++i) name += "_with_" + fs[i].name();
  for (const Func& f : fs) {
    elements.push_back(f(vars));
    drop_materialized(l, f);  // inlined into the Tuple: its elements read the inputs' same loads
  }
  Func tuple(name);
  tuple(vars) = Tuple(elements);
  for (size_t i = 0; i < fs.size(); ++i) {
    const auto& shape = l.values.at(l.output_values[k + i]).shape;
    if (i == 0) set_dense_shape(tuple.output_buffers()[0], shape);
    else set_dense_strides(tuple.output_buffers()[i], shape);
  }
  l.outputs[k] = tuple;
  l.outputs.erase(l.outputs.begin() + std::ptrdiff_t(k) + 1, l.outputs.begin() + std::ptrdiff_t(k + count));
  l.output_values[k] = value;
  l.output_values.erase(l.output_values.begin() + std::ptrdiff_t(k) + 1,
                        l.output_values.begin() + std::ptrdiff_t(k + count));
}

}  // namespace

void compute_outputs_together(const Graph& g, const Region& r, LoweredRegion& l) {
  // A pointwise value and the row op that reads it.
  for (size_t k = 0; k + 1 < l.outputs.size(); ++k)
    if (pairs(g, r, l, k)) make_tuple(l, k, 2, l.output_values[k + 1]);
  // Runs of pointwise values of one shape (an optimizer's new parameter and state).
  for (size_t k = 0; k < l.outputs.size(); ++k) {
    if (!stored_pointwise(g, l, k)) continue;
    size_t end = k + 1;
    while (end < l.outputs.size() && stored_pointwise(g, l, end) &&
           g.values[size_t(l.output_values[end])].sym == g.values[size_t(l.output_values[k])].sym)
      ++end;
    std::set<int> members(l.output_values.begin() + std::ptrdiff_t(k), l.output_values.begin() + std::ptrdiff_t(end));
    if (members.size() < 2 || !std::all_of(members.begin(), members.end(), [&](int v) { return feeds_only(g, r, l, v, members); }))
      continue;
    make_tuple(l, k, end - k, l.output_values[end - 1]);
  }
}

}  // namespace kiln
