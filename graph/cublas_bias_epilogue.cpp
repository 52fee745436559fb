// cublas_bias_epilogue (graph/passes.h): on CUDA, add(matmul(a, b), bias) with a bias along the
// product's last dim becomes matmul_bias(a, b, bias), which cuBLASLt computes with the bias added
// in its epilogue: the product is written once, with no pass of its own to add the bias.
#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// The matmul node whose only use is add node n with a bias, and which input of n is the bias; -1
// when n is not such an add.
int folded_matmul(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                  const std::set<int>& outputs, int& bias_input) {
  if (n.op->name != "add" || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return -1;
  const Value& sum = g.values[size_t(n.outputs[0])];
  if (!sum.meta.device.is_cuda()) return -1;
  for (int k = 0; k < 2; ++k) {
    int product = n.inputs[size_t(k)], bias = n.inputs[size_t(1 - k)];
    const Value &p = g.values[size_t(product)], &b = g.values[size_t(bias)];
    if (p.producer < 0 || outputs.count(product) || readers[size_t(product)].size() != 1) continue;
    const GraphNode& m = g.nodes[size_t(p.producer)];
    if (m.op->name != "matmul" || m.outputs.size() != 1) continue;
    if (p.meta.shape.empty() || b.meta.shape != Shape{p.meta.shape.back()} || b.meta.dtype != p.meta.dtype ||
        sum.meta.dtype != p.meta.dtype || sum.meta.shape != p.meta.shape)
      continue;
    const Value &x = g.values[size_t(m.inputs[0])], &w = g.values[size_t(m.inputs[1])];
    if (x.meta.dtype != p.meta.dtype || w.meta.dtype != p.meta.dtype ||
        !cublas_bias_epilogue_applies(x.meta.shape, x.strides, w.meta.shape, w.strides, p.meta.shape))
      continue;
    bias_input = k == 0 ? 1 : 0;
    return p.producer;
  }
  return -1;
}

}  // namespace

int cublas_bias_epilogue(Graph& g) {
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<int> folds(g.nodes.size(), -1), bias_of(g.nodes.size(), -1);
  std::vector<bool> dropped(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int bias = -1;
    int m = folded_matmul(g, g.nodes[i], readers, outputs, bias);
    if (m < 0) continue;
    folds[i] = m, bias_of[i] = bias, dropped[size_t(m)] = true;
    ++count;
  }
  if (count == 0) return 0;
  static const OpDef& matmul_bias = op_def("matmul_bias");
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (dropped[i]) continue;
    if (folds[i] < 0) {
      r.copy(n);
      continue;
    }
    const GraphNode& m = g.nodes[size_t(folds[i])];
    std::vector<int> ins = r.ids({m.inputs[0], m.inputs[1], n.inputs[size_t(bias_of[i])]});
    size_t mark = r.out.nodes.size();
    int out = r.out.add_inferred_node(matmul_bias, {}, ins)[0];
    for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
    r.set(n.outputs[0], out);
  }
  g = std::move(r).finish();
  return count;
}

}  // namespace kiln
