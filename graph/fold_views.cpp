#include "graph/passes.h"

namespace kiln {

namespace {

// Same elements at the same addresses: strides of size-1 dims do not matter.
bool same_layout(const Graph& g, const Value& a, const Value& b) {
  if (a.meta.shape != b.meta.shape || a.meta.dtype != b.meta.dtype || a.meta.device != b.meta.device ||
      a.offset != b.offset || g.shape_env->canonical(a.sym) != g.shape_env->canonical(b.sym))
    return false;
  for (size_t d = 0; d < a.meta.shape.size(); ++d)
    if (a.meta.shape[d] != 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

// view(reshape(x)) -> view(x) when x is contiguous: both read x's elements in row-major order.
bool skip_reshape(Graph& g, GraphNode& node) {
  int p = g.values[node.inputs[0]].producer;
  if (node.op->name != "view" || p < 0 || !g.nodes[p].op->view.reshape) return false;
  int x = g.nodes[p].inputs[0];
  const Value& in = g.values[x];
  if (!is_contiguous(in.meta.shape, in.strides)) return false;
  Value& out = g.values[node.outputs[0]];
  ViewMeta v = node.op->view.layout({in.meta.shape, in.strides, in.offset}, node.attrs);
  if (v.shape != out.meta.shape) return false;
  out.strides = v.strides;
  out.offset = v.offset;
  node.inputs[0] = x;
  return true;
}

}  // namespace

int fold_views(Graph& g) {
  std::vector<int> repl(g.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = int(v);
  int folded = 0;
  for (GraphNode& node : g.nodes) {
    for (int& v : node.inputs) v = repl[v];
    // A view that cuts autograd (detach) stays: folding it would let gradients through.
    if (node.op->schedule_class != ScheduleClass::view || !node.op->differentiable) continue;
    bool changed = skip_reshape(g, node);
    if (same_layout(g, g.values[node.inputs[0]], g.values[node.outputs[0]])) {
      repl[node.outputs[0]] = node.inputs[0];
      changed = true;
    }
    folded += changed;
  }
  for (int& v : g.outputs) v = repl[v];
  if (folded) eliminate_dead_code(g);
  return folded;
}

}  // namespace kiln
