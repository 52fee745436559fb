#include "graph/partition.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "autograd/derivatives.h"
#include "dsl/error.h"
#include "graph/min_cut.h"

namespace kiln {

namespace {

int64_t bytes_of(const Value& v) { return numel(v.meta.shape) * int64_t(itemsize(v.meta.dtype)); }

bool is_view(const GraphNode& n) { return n.op->schedule_class == ScheduleClass::view; }

// Ops too expensive to run twice (random draws must never run twice: see partition_joint).
bool must_not_recompute(const GraphNode& n) {
  switch (n.op->schedule_class) {
    case ScheduleClass::matmul:
    case ScheduleClass::reduction:
    case ScheduleClass::normalization:
    case ScheduleClass::gather:
    case ScheduleClass::scatter:
    case ScheduleClass::custom: return true;  // a user's kernel: its cost is unknown
    default: return false;
  }
}

struct Input {
  int value;
  InputKind kind;
  int index;
  std::string name;
};

// A graph of `j`'s inputs `ins`, the nodes marked in `keep` (in order) and the outputs `outs`;
// no op records autograd.
std::shared_ptr<Graph> extract(const Graph& j, const std::vector<Input>& ins, const std::vector<bool>& keep,
                               const std::vector<int>& outs) {
  auto g = std::make_shared<Graph>();
  g->shape_env = j.shape_env;
  std::vector<int> id(j.values.size(), -1);
  for (const Input& in : ins) {
    const Value& v = j.values[size_t(in.value)];
    id[size_t(in.value)] = g->add_input(in.kind, in.index, in.name, v.meta, v.sym, v.strides, v.offset, false);
  }
  for (size_t n = 0; n < j.nodes.size(); ++n) {
    if (!keep[n]) continue;
    const GraphNode& node = j.nodes[n];
    std::vector<int> args;
    for (int v : node.inputs) {
      KILN_CHECK(id[size_t(v)] >= 0, "partition: ", node.op->name, " reads a value its graph does not have (internal error)");
      args.push_back(id[size_t(v)]);
    }
    std::vector<Value> made;
    for (int v : node.outputs) made.push_back(j.values[size_t(v)]);
    std::vector<int> ids = g->add_node(*node.op, node.attrs, args, std::move(made));
    g->nodes.back().grad_enabled = false;
    for (size_t k = 0; k < ids.size(); ++k) id[size_t(node.outputs[k])] = ids[k];
  }
  for (int v : outs) g->outputs.push_back(id[size_t(v)]);
  return g;
}

// The nodes that compute `roots`, directly or through other nodes.
std::vector<bool> producers_of(const Graph& j, std::vector<int> roots) {
  std::vector<bool> marked(j.nodes.size(), false), seen(j.values.size(), false);
  while (!roots.empty()) {
    int v = roots.back();
    roots.pop_back();
    int n = j.values[size_t(v)].producer;
    if (seen[size_t(v)] || n < 0) continue;
    seen[size_t(v)] = true;
    marked[size_t(n)] = true;
    roots.insert(roots.end(), j.nodes[size_t(n)].inputs.begin(), j.nodes[size_t(n)].inputs.end());
  }
  return marked;
}

}  // namespace

Partition partition_joint(const Graph& j) {
  KILN_CHECK(j.joint.has_value(), "partition: the graph is not a joint forward+backward graph");
  const int forward_inputs = j.forward_input_count();
  const size_t V = j.values.size();
  // Backward ops: those that read a tangent, directly or not. Every other op is forward-side: the
  // cut decides whether it runs in the forward (and is saved) or again in the backward.
  std::vector<bool> tangent(V, false), backward_node(j.nodes.size(), false);
  for (size_t i = size_t(forward_inputs); i < j.inputs.size(); ++i) tangent[size_t(j.inputs[i].value)] = true;
  for (size_t n = 0; n < j.nodes.size(); ++n) {
    for (int v : j.nodes[n].inputs) backward_node[n] = backward_node[n] || tangent[size_t(v)];
    for (int v : j.nodes[n].outputs) tangent[size_t(v)] = backward_node[n];
  }

  // Ops the forward outputs need run in the forward anyway: for them "recompute" means running
  // twice. An expensive op only the backward needs (a reduction inside a derivative rule) runs
  // once on either side, so the cut may place it in the backward.
  const std::vector<int> forward_outs(j.outputs.begin(), j.outputs.begin() + j.joint->forward_outputs);
  const std::vector<bool> for_outputs = producers_of(j, forward_outs);

  const int source = int(2 * V), sink = source + 1;
  auto in = [](int v) { return 2 * v; };
  auto out = [](int v) { return 2 * v + 1; };
  MinCut cut(sink + 1);
  for (int i = 0; i < forward_inputs; ++i) {
    cut.add_edge(source, in(j.inputs[size_t(i)].value), MinCut::infinite);
    cut.add_edge(in(j.inputs[size_t(i)].value), out(j.inputs[size_t(i)].value), 0);
  }
  std::vector<int> needed;  // forward values the backward reads
  for (size_t n = 0; n < j.nodes.size(); ++n) {
    const GraphNode& node = j.nodes[n];
    // What a comparison reads keeps the forward's bits: recomputed in another pipeline, a value
    // may round differently and no longer equal its saved max (max's rule divides by the count
    // of ties, which would be 0).
    if (node.op->comparison)
      for (int u : node.inputs) {
        while (j.values[size_t(u)].producer >= 0 && is_view(j.nodes[size_t(j.values[size_t(u)].producer)]))
          u = j.nodes[size_t(j.values[size_t(u)].producer)].inputs[0];  // a view recomputes exactly: its base
        int p = j.values[size_t(u)].producer;
        // Constants and masks recompute exactly (a mask from its own inputs, pinned here too).
        bool exact = p >= 0 && ((j.nodes[size_t(p)].inputs.empty() && !j.nodes[size_t(p)].op->random) ||
                                j.nodes[size_t(p)].op->comparison);
        if (!tangent[size_t(u)] && !exact) cut.add_edge(source, in(u), MinCut::infinite);
      }
    if (backward_node[n]) {
      for (int v : node.inputs)
        if (!tangent[size_t(v)]) needed.push_back(v);
      continue;
    }
    for (int v : node.outputs) {
      // Never saved: a view (its base is) and a comparison's mask (recomputed exactly from its
      // inputs, which keep the forward's bits; a saved bool crossing pipelines read wrong once).
      bool recompute_only = is_view(node) || (node.op->comparison && !node.op->random);
      cut.add_edge(in(v), out(v), recompute_only ? MinCut::infinite : bytes_of(j.values[size_t(v)]));
      if (node.op->effectful() || (must_not_recompute(node) && for_outputs[n])) cut.add_edge(source, in(v), MinCut::infinite);
      for (int u : node.inputs) cut.add_edge(out(u), in(v), MinCut::infinite);
    }
  }
  const std::vector<int> grads(j.outputs.begin() + j.joint->forward_outputs, j.outputs.end());
  for (int v : grads)
    if (!tangent[size_t(v)]) needed.push_back(v);
  for (int v : needed) cut.add_edge(out(v), sink, MinCut::infinite);
  cut.solve(source, sink);
  const std::vector<bool>& reach = cut.source_side();

  // Walk back from what the backward reads: a value cut at its out-side is saved; any other is
  // computed again from its inputs.
  Partition p;
  std::vector<bool> saved(V, false), recompute(j.nodes.size(), false), seen(V, false);
  std::vector<int> work = needed;
  while (!work.empty()) {
    int v = work.back();
    work.pop_back();
    if (seen[size_t(v)]) continue;
    seen[size_t(v)] = true;
    const Value& x = j.values[size_t(v)];
    if (reach[size_t(in(v))] && !reach[size_t(out(v))]) {
      saved[size_t(v)] = true;
      continue;
    }
    KILN_CHECK(x.producer >= 0 && !reach[size_t(in(v))], "partition: value %", v,
               " is needed by the backward but neither saved nor recomputable (internal error)");
    recompute[size_t(x.producer)] = true;
    for (int u : j.nodes[size_t(x.producer)].inputs) work.push_back(u);
  }

  // The forward: every forward-side op that its outputs or the saved values need, and every
  // random draw (a draw advances the generator even when unused).
  std::vector<int> saved_values;
  std::vector<bool> is_input(V, false);
  for (int i = 0; i < forward_inputs; ++i) is_input[size_t(j.inputs[size_t(i)].value)] = true;
  for (size_t v = 0; v < V; ++v)
    if (saved[v]) saved_values.push_back(int(v));
  std::vector<int> forward_roots = forward_outs;
  forward_roots.insert(forward_roots.end(), saved_values.begin(), saved_values.end());
  for (size_t n = 0; n < j.nodes.size(); ++n)
    if (!backward_node[n] && j.nodes[n].op->effectful()) forward_roots.push_back(j.nodes[n].outputs[0]);
  const std::vector<bool> in_forward = producers_of(j, forward_roots);

  std::vector<Input> forward_ins, backward_ins;
  for (int i = 0; i < forward_inputs; ++i) {
    const GraphInput& x = j.inputs[size_t(i)];
    forward_ins.push_back({x.value, x.kind, x.index, x.name});
  }
  std::vector<int> extra_outs;
  for (int v : saved_values) {
    if (is_input[size_t(v)]) {
      int i = 0;
      while (j.inputs[size_t(i)].value != v) ++i;
      const GraphInput& x = j.inputs[size_t(i)];
      backward_ins.push_back({v, x.kind, x.index, x.name});
      p.saved_from_input.push_back(i);
    } else {
      backward_ins.push_back({v, InputKind::saved, int(extra_outs.size()), "saved" + std::to_string(extra_outs.size())});
      p.saved_from_input.push_back(-1);
      extra_outs.push_back(v);
      p.saved_bytes += bytes_of(j.values[size_t(v)]);
    }
  }
  for (size_t i = size_t(forward_inputs); i < j.inputs.size(); ++i) {
    const GraphInput& x = j.inputs[i];
    backward_ins.push_back({x.value, x.kind, x.index, x.name});
  }
  std::vector<bool> in_backward(j.nodes.size(), false);
  for (size_t n = 0; n < j.nodes.size(); ++n) {
    in_backward[n] = backward_node[n] || recompute[n];
    p.recomputed_ops += recompute[n] && !is_view(j.nodes[n]);
  }
  std::vector<int> outs = forward_outs;
  outs.insert(outs.end(), extra_outs.begin(), extra_outs.end());
  p.forward = extract(j, forward_ins, in_forward, outs);
  p.backward = extract(j, backward_ins, in_backward, grads);
  p.forward->trains = p.backward->trains = true;
  return p;
}

int64_t eager_tape_bytes(const Graph& g) {
  std::vector<bool> carries = g.grad_carrying_values(), counted(g.values.size(), false);
  for (const GraphInput& in : g.inputs) counted[size_t(in.value)] = true;
  int64_t total = 0;
  for (const GraphNode& n : g.nodes) {
    if (!n.grad_enabled || !is_differentiable(*n.op)) continue;
    bool records = false;
    for (int v : n.inputs) records = records || carries[size_t(v)];
    if (!records) continue;
    for (const auto* list : {&n.inputs, &n.outputs})
      for (int v : *list) {
        const Value& x = g.values[size_t(v)];
        if (counted[size_t(v)] || (x.producer >= 0 && is_view(g.nodes[size_t(x.producer)]))) continue;
        counted[size_t(v)] = true;
        total += bytes_of(x);
      }
  }
  return total;
}

std::string Partition::describe() const {
  std::ostringstream os;
  int from_inputs = int(std::count_if(saved_from_input.begin(), saved_from_input.end(), [](int i) { return i >= 0; }));
  os << "saves " << saved_from_input.size() - size_t(from_inputs) << " values (" << saved_bytes << " bytes) and "
     << from_inputs << " inputs; the backward recomputes " << recomputed_ops << " ops; forward " << forward->op_count()
     << " ops, backward " << backward->op_count() << " ops";
  return os.str();
}

}  // namespace kiln
