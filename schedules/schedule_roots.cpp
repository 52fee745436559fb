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

// Whether f's definition reads a Func or an image across its layout: some call's innermost
// index does not follow f's innermost var while another index does (a transpose or permute), or
// it reads an input stored with a non-dense innermost dim.
class ReadsAcross : public Internal::IRVisitor {
 public:
  ReadsAcross(std::string inner, const std::set<std::string>& transposed_inputs)
      : inner_(std::move(inner)), transposed_inputs_(transposed_inputs) {}
  bool found = false;

 private:
  using IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    IRVisitor::visit(c);
    if (c->call_type != Internal::Call::Halide && c->call_type != Internal::Call::Image) return;
    if (transposed_inputs_.count(c->name)) found = true;
    if (c->args.size() < 2 || Internal::expr_uses_var(c->args[0], inner_)) return;
    for (size_t k = 1; k < c->args.size(); ++k) found = found || Internal::expr_uses_var(c->args[k], inner_);
  }
  std::string inner_;
  const std::set<std::string>& transposed_inputs_;
};

bool reads_across(const Func& f, const std::set<std::string>& transposed_inputs) {
  if (f.args().empty()) return false;
  ReadsAcross v(f.args()[0].name(), transposed_inputs);
  for (const Expr& e : f.function().definition().values()) e.accept(&v);
  return v.found;
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
  for (size_t k = 0; k < r.outputs.size(); ++k) roots.push_back({lowered.outputs[k], r.outputs[k], {}, {}});
  std::set<std::string> stop;
  for (const ScheduleRoot& root : roots) stop.insert(root.func.name());
  for (const Func& m : lowered.materialized) {
    if (stop.count(m.name())) continue;  // already an output
    for (auto& [v, t] : lowered.values)
      if (t.func.name() == m.name()) {
        roots.push_back({m, v, {}, {}});
        stop.insert(m.name());
        break;
      }
  }
  for (const ImageParam& p : lowered.inputs) stop.insert(p.name());
  for (ScheduleRoot& root : roots)
    for (Func c : calls_until(root.func, stop))
      (c.has_update_definition() ? root.inner : root.inlined).push_back(c);
  for (ScheduleRoot& root : roots) {
    root.transposed = reads_across(root.func, lowered.transposed_inputs);
    for (const Func& c : root.inlined) root.transposed = root.transposed || reads_across(c, lowered.transposed_inputs);
  }
  return roots;
}

}  // namespace kiln
