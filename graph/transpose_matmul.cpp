#include "graph/passes.h"

namespace kiln {

namespace {

// n transposes (dims 0 and 1) the 2-D result of a matmul of 2-D operands that nothing else reads.
bool transposes_a_private_matmul(const Graph& g, const GraphNode& n, const std::vector<int>& readers) {
  if (n.op->name != "transpose" || g.values[size_t(n.inputs[0])].meta.shape.size() != 2) return false;
  int64_t d0 = n.attrs.get<int64_t>("dim0"), d1 = n.attrs.get<int64_t>("dim1");
  if ((d0 + 2) % 2 == (d1 + 2) % 2) return false;
  const Value& v = g.values[size_t(n.inputs[0])];
  if (v.producer < 0 || readers[size_t(n.inputs[0])] != 1) return false;
  const GraphNode& m = g.nodes[size_t(v.producer)];
  if (m.op->name != "matmul") return false;
  for (int x : m.inputs)
    if (g.values[size_t(x)].meta.shape.size() != 2) return false;
  return true;
}

}  // namespace

int transpose_matmuls(Graph& g) {
  std::vector<int> readers(g.values.size(), 0);
  for (const GraphNode& n : g.nodes)
    for (int v : n.inputs) ++readers[size_t(v)];
  for (int v : g.outputs) ++readers[size_t(v)];
  std::vector<bool> rewrite(g.nodes.size(), false), skip(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (transposes_a_private_matmul(g, g.nodes[i], readers)) {
      rewrite[i] = true;
      skip[size_t(g.values[size_t(g.nodes[i].inputs[0])].producer)] = true;
      ++count;
    }
  if (count == 0) return 0;
  static const OpDef& transpose = op_def("transpose");
  const Attrs swap{{"dim0", int64_t(0)}, {"dim1", int64_t(1)}};
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (skip[i]) continue;
    if (!rewrite[i]) {
      r.copy(n);
      continue;
    }
    // (a b)^T = b^T a^T: one GEMM that writes the layout its readers want.
    const GraphNode& m = g.nodes[size_t(g.values[size_t(n.inputs[0])].producer)];
    int bt = r.out.add_inferred_node(transpose, swap, {r.id(m.inputs[1])})[0];
    int at = r.out.add_inferred_node(transpose, swap, {r.id(m.inputs[0])})[0];
    int product = r.out.add_inferred_node(*m.op, m.attrs, {bt, at})[0];
    for (size_t k = r.out.nodes.size() - 3; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
    r.set(n.outputs[0], product);
  }
  g = std::move(r).finish();
  return count;
}

}  // namespace kiln
