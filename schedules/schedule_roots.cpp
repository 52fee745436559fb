#include "schedules/schedule_roots.h"

#include <set>
#include <string>

namespace kiln {

using namespace Halide;

namespace {

// The Funcs f calls, directly or through inlined Funcs, stopping at the ones in `stop`.
std::vector<Func> calls_until(const Func& f, const std::set<std::string>& stop) {
  std::vector<Func> out;
  std::set<std::string> seen{f.name()};
  std::vector<Internal::Function> todo{f.function()};
  while (!todo.empty()) {
    Internal::Function fn = todo.back();
    todo.pop_back();
    for (const auto& [name, callee] : Internal::find_direct_calls(fn)) {
      if (stop.count(name) || !seen.insert(name).second) continue;
      out.push_back(Func(callee));
      todo.push_back(callee);
    }
  }
  return out;
}

}  // namespace

std::vector<Var> pure_vars(const Func& f) {
  std::vector<Var> v;
  for (const Var& a : f.args()) v.push_back(a);
  return v;
}

Reduces reduction_kind(const Graph& g, int value) {
  int p = g.values[size_t(value)].producer;
  if (p < 0) return Reduces::nothing;
  const GraphNode& n = g.nodes[size_t(p)];
  if (n.inputs.empty()) return Reduces::nothing;
  int rank = int(g.values[size_t(n.inputs.at(0))].meta.shape.size());
  if (rank == 0) return Reduces::rows;
  switch (n.op->schedule_class) {
    case ScheduleClass::normalization:
      if (n.attrs.has("dim")) return wrap_dim(n.op->name, n.attrs.get<int64_t>("dim"), rank) == rank - 1 ? Reduces::rows : Reduces::columns;
      return Reduces::rows;  // layer_norm, cross_entropy: along the last dims
    case ScheduleClass::reduction: {
      const auto& dims = n.attrs.get<std::vector<int64_t>>("dims");
      if (dims.empty()) return Reduces::rows;
      for (int64_t d : dims)
        if (wrap_dim(n.op->name, d, rank) == rank - 1) return Reduces::rows;
      return Reduces::columns;
    }
    default: return Reduces::nothing;
  }
}

std::vector<ScheduleRoot> schedule_roots(const Region& r, const LoweredRegion& lowered) {
  std::vector<ScheduleRoot> roots;
  for (size_t k = 0; k < r.outputs.size(); ++k) roots.push_back({lowered.outputs[k], r.outputs[k], {}});
  std::set<std::string> stop;
  for (const ScheduleRoot& root : roots) stop.insert(root.func.name());
  for (const Func& m : lowered.materialized) {
    if (stop.count(m.name())) continue;  // already an output
    for (auto& [v, t] : lowered.values)
      if (t.func.name() == m.name()) {
        roots.push_back({m, v, {}});
        stop.insert(m.name());
        break;
      }
  }
  for (const ImageParam& p : lowered.inputs) stop.insert(p.name());
  for (ScheduleRoot& root : roots)
    for (Func c : calls_until(root.func, stop))
      (c.has_update_definition() ? root.inner : root.inlined).push_back(c);
  return roots;
}

}  // namespace kiln
