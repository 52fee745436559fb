#include "schedules/schedule_roots.h"

#include <algorithm>
#include <map>
#include <numeric>
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

// Which of f's dims a read across a layout follows: a call whose innermost index (simplified)
// follows that dim of f instead of f's innermost while another index follows f's innermost (a
// transpose, a permute), or 1 for a read of an input stored with a non-dense innermost dim; -1
// when every read is along f's layout or broadcast along it.
class ReadsAcross : public Internal::IRVisitor {
 public:
  ReadsAcross(const Func& f, const std::set<std::string>& transposed_inputs)
      : vars_(pure_vars(f)), transposed_inputs_(transposed_inputs) {}

  int dim = -1;
  Func callee;          // the Func read across (a call of f's own; undefined for an input's strides)
  int across_arg = -1;  // the callee's dim that f's innermost var walks

 private:
  using IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    IRVisitor::visit(c);
    if (dim >= 0 || (c->call_type != Internal::Call::Halide && c->call_type != Internal::Call::Image)) return;
    if (transposed_inputs_.count(c->name) && vars_.size() > 1) dim = 1;
    if (c->args.empty()) return;
    Expr inner = Internal::simplify(c->args[0]);
    if (Internal::expr_uses_var(inner, vars_[0].name())) return;
    // f's innermost var in none of the indices: the read broadcasts along f's rows (each element
    // of a row reads the row's mean), it does not cross the layout.
    bool walks_rows = false;
    for (size_t k = 1; k < c->args.size(); ++k) walks_rows = walks_rows || Internal::expr_uses_var(c->args[k], vars_[0].name());
    if (!walks_rows) return;
    for (size_t d = 1; d < vars_.size() && dim < 0; ++d)
      if (Internal::expr_uses_var(inner, vars_[d].name())) dim = int(d);
    if (dim < 0 || c->call_type != Internal::Call::Halide) return;
    for (size_t k = 1; k < c->args.size() && across_arg < 0; ++k)
      if (Internal::expr_uses_var(c->args[k], vars_[0].name())) across_arg = int(k);
    if (across_arg > 0) callee = Func(Internal::Function(c->func));
  }

  std::vector<Var> vars_;
  const std::set<std::string>& transposed_inputs_;
};

int reads_across(const Func& f, const std::set<std::string>& transposed_inputs, ScheduleRoot* root = nullptr) {
  if (f.args().empty()) return -1;
  ReadsAcross v(f, transposed_inputs);
  for (const Expr& e : f.function().definition().values()) e.accept(&v);
  if (root) root->read_across = v.callee, root->read_across_dim = v.across_arg;
  return v.dim;
}

}  // namespace

std::vector<Func> root_funcs(const ScheduleRoot& root) {
  std::vector<Func> fs{root.func};
  fs.insert(fs.end(), root.inner.begin(), root.inner.end());
  fs.insert(fs.end(), root.inlined.begin(), root.inlined.end());
  return fs;
}

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

int64_t reduction_length(const Graph& g, int value) {
  int p = g.values[size_t(value)].producer;
  int64_t out = numel(g.values[size_t(value)].meta.shape);
  if (p < 0 || out == 0) return 1;
  int64_t in = 0;
  for (int i : g.nodes[size_t(p)].inputs) in = std::max(in, numel(g.values[size_t(i)].meta.shape));
  return std::max<int64_t>(1, in / out);
}

int64_t row_length(const Graph& g, int value) {
  const Shape& s = g.values[size_t(value)].meta.shape;
  return s.empty() ? 1 : s.back();
}

int reducing_value(const ScheduleRoot& root) {
  if (root.fused_row_op >= 0) return root.fused_row_op;
  return root.reduction >= 0 ? root.reduction : root.value;
}

CatChunks cat_chunks(const Graph& g, int value) {
  int p = g.values[size_t(value)].producer;
  if (p < 0 || g.nodes[size_t(p)].op->name != "cat") return {};
  const GraphNode& n = g.nodes[size_t(p)];
  const SymShape& out = g.values[size_t(value)].sym;
  int rank = int(out.size());
  int d = wrap_dim("cat", n.attrs.get<int64_t>("dim"), rank);
  if (!out[size_t(d)].is_static()) return {};
  int64_t width = 0;
  for (int x : n.inputs) {
    const SymShape& s = g.values[size_t(x)].sym;
    if (int(s.size()) != rank || !s[size_t(d)].is_static()) return {};
    width = std::gcd(width, s[size_t(d)].coeff);
  }
  if (width == 0 || out[size_t(d)].coeff / width > kMaxCatChunks) return {};
  return {rank - 1 - d, width, out[size_t(d)].coeff};
}

std::vector<ScheduleRoot> schedule_roots(const LoweredRegion& lowered) {
  std::vector<ScheduleRoot> roots;
  for (size_t k = 0; k < lowered.outputs.size(); ++k)
    roots.push_back({lowered.outputs[k], lowered.output_values[k], {}, {}, -1, {}, -1, -1});
  std::set<std::string> stop;
  for (const ScheduleRoot& root : roots) stop.insert(root.func.name());
  for (const Func& m : lowered.materialized) {
    if (stop.count(m.name())) continue;  // already an output
    for (auto& [v, t] : lowered.values)
      if (t.func.name() == m.name()) {
        roots.push_back({m, v, {}, {}, -1, {}, -1, -1});
        stop.insert(m.name());
        break;
      }
  }
  for (const ImageParam& p : lowered.inputs) stop.insert(p.name());
  for (ScheduleRoot& root : roots)
    for (Func c : calls_until(root.func, stop)) {
      (c.has_update_definition() ? root.inner : root.inlined).push_back(c);
      auto fused = lowered.fused_row_ops.find(c.name());
      if (fused != lowered.fused_row_ops.end()) root.fused_row_op = fused->second;
    }
  std::map<std::string, int> index;
  for (size_t k = 0; k < roots.size(); ++k) index.emplace(roots[k].func.name(), int(k));
  for (ScheduleRoot& root : roots) {
    std::set<int> reads;
    for (const Func& f : root_funcs(root))
      for (const auto& [name, callee] : Internal::find_direct_calls(f.function()))
        if (auto k = index.find(name); k != index.end() && k->first != root.func.name()) reads.insert(k->second);
    root.reads.assign(reads.begin(), reads.end());
  }
  for (ScheduleRoot& root : roots) {
    auto epilogue = lowered.reduction_epilogues.find(root.value);
    if (epilogue != lowered.reduction_epilogues.end()) root.reduction = epilogue->second;
    root.transposed_dim = reads_across(root.func, lowered.transposed_inputs, &root);
    for (const Func& c : root.inlined)  // a transpose inside an inlined Func: its reader's dims are unknown here
      if (root.transposed_dim < 0 && reads_across(c, lowered.transposed_inputs) >= 0) root.transposed_dim = 1;
  }
  return roots;
}

}  // namespace kiln
