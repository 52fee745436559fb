#include "schedules/tuple_outputs.h"

#include <algorithm>

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

// Whether region outputs a and b (consecutive) are computed together: see the header.
bool pairs(const Graph& g, const Region& r, const LoweredRegion& l, int a, int b) {
  const Value& va = g.values[size_t(a)];
  const Value& vb = g.values[size_t(b)];
  if (!va.meta.device.is_cuda() || va.meta.dtype != DType::f32 || vb.meta.dtype != DType::f32 || va.sym != vb.sym ||
      va.sym.empty() || va.producer < 0 || vb.producer < 0)
    return false;
  const GraphNode& na = g.nodes[size_t(va.producer)];
  const GraphNode& nb = g.nodes[size_t(vb.producer)];
  if (!is_pointwise(na) || na.op->family == KernelFamily::copy) return false;
  if (nb.op->schedule_class != ScheduleClass::normalization || reduction_kind(g, b) != Reduces::rows) return false;
  for (int n : r.nodes)  // b's op is a's one reader in the region
    if (n != vb.producer && std::count(g.nodes[size_t(n)].inputs.begin(), g.nodes[size_t(n)].inputs.end(), a)) return false;
  if (std::find(nb.inputs.begin(), nb.inputs.end(), a) == nb.inputs.end()) return false;
  // An output computed over an input's memory (in_place.h) is still safe: each element of the
  // pair reads the inputs at its own position only, and a row's reductions read the row before
  // the row is written.
  for (int v : {a, b})
    if (l.reduction_epilogues.count(v)) return false;
  for (const LoweredGemm& gemm : l.gemms)
    if (gemm.root == a || gemm.root == b) return false;
  // The row op is stored (not fused into a reader of its row).
  const Func& fb = l.values.at(b).func;
  return materialized(l, fb) && !l.fused_row_ops.count(fb.name());
}

}  // namespace

void compute_outputs_together(const Graph& g, const Region& r, LoweredRegion& l) {
  for (size_t k = 0; k + 1 < l.outputs.size(); ++k) {
    int a = l.output_values[k], b = l.output_values[k + 1];
    if (l.outputs[k].name() != l.values.at(a).func.name() || l.outputs[k + 1].name() != l.values.at(b).func.name() ||
        !pairs(g, r, l, a, b))
      continue;
    Func fa = l.outputs[k], fb = l.outputs[k + 1];
    std::vector<Var> vars = pure_vars(fb);
    Func both(fb.name() + "_with_" + fa.name());
    both(vars) = Tuple(fa(vars), fb(vars));
    drop_materialized(l, fa);  // both are inlined into the pair: the row op's reductions and the
    drop_materialized(l, fb);  // pair read the pointwise value from the same loads of its inputs
    set_dense_shape(both.output_buffers()[0], l.values.at(a).shape);
    set_dense_strides(both.output_buffers()[1], l.values.at(b).shape);
    l.outputs[k] = both;
    l.outputs.erase(l.outputs.begin() + std::ptrdiff_t(k) + 1);
    l.output_values[k] = b;
    l.output_values.erase(l.output_values.begin() + std::ptrdiff_t(k) + 1);
  }
}

}  // namespace kiln
