#include "graph/passes.h"

namespace kiln {

namespace {

std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  std::vector<int> work;
  auto reach = [&](int v) {
    int p = g.values[v].producer;
    if (p >= 0 && !live[p]) {
      live[p] = true;
      work.push_back(p);
    }
  };
  for (int v : g.outputs) reach(v);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op->random && !live[n]) {
      live[n] = true;
      work.push_back(int(n));
    }
  while (!work.empty()) {
    int n = work.back();
    work.pop_back();
    for (int v : g.nodes[n].inputs) reach(v);
  }
  return live;
}

}  // namespace

int eliminate_dead_code(Graph& g) {
  std::vector<bool> live = live_nodes(g);
  Graph out;
  out.shape_env = g.shape_env;
  std::vector<int> id(g.values.size(), -1);
  for (const GraphInput& in : g.inputs) {
    const Value& v = g.values[in.value];
    id[in.value] = out.add_input(in.kind, in.index, in.name, v.meta, v.sym, v.strides, v.offset, in.requires_grad);
  }
  int removed = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const GraphNode& node = g.nodes[n];
    if (!live[n]) {
      ++removed;
      continue;
    }
    std::vector<int> ins;
    for (int v : node.inputs) ins.push_back(id[v]);
    std::vector<Value> outs;
    for (int v : node.outputs) outs.push_back(g.values[v]);
    std::vector<int> made = out.add_node(*node.op, node.attrs, ins, std::move(outs));
    out.nodes.back().grad_enabled = node.grad_enabled;
    for (size_t k = 0; k < made.size(); ++k) id[node.outputs[k]] = made[k];
  }
  for (int v : g.outputs) out.outputs.push_back(id[v]);
  g = std::move(out);
  return removed;
}

}  // namespace kiln
