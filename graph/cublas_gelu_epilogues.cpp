// cublas_gelu_epilogues (graph/passes.h): on CUDA, GELU in its tanh form moves into the epilogue of
// the cuBLASLt GEMM beside it, forward and backward.
#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

bool tanh_gelu(const GraphNode& n, std::string_view op) {
  return n.op->name == op && n.attrs.get_or<std::string>("approximate", "none") == "tanh";
}

// cuBLASLt's GELU epilogues take f32 (TF32 too), f16 and bf16.
bool lt_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// GELU's input as cuBLASLt stores or reads it beside the product: dense rows whose length is a
// multiple of 8 (its leading dimension's rule).
bool aux_layout(const Value& v) {
  return !v.meta.shape.empty() && v.meta.shape.back() % 8 == 0 && v.strides == contiguous_strides(v.meta.shape);
}

// The gradient product of gelu_backward node n: a plain matmul on CUDA read by n only, whose
// operands cuBLASLt reads in place as one matrix, the same shape and dtype as GELU's input x.
bool backward_fold(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                   const std::set<int>& outputs) {
  if (!tanh_gelu(n, "gelu_backward") || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return false;
  int grad = n.inputs[0];
  const Value &p = g.values[size_t(grad)], &x = g.values[size_t(n.inputs[1])], &y = g.values[size_t(n.outputs[0])];
  if (p.producer < 0 || outputs.count(grad) || readers[size_t(grad)].size() != 1) return false;
  const GraphNode& m = g.nodes[size_t(p.producer)];
  if (m.op->name != "matmul" || m.outputs.size() != 1 || !p.meta.device.is_cuda() || !lt_dtype(p.meta.dtype))
    return false;
  if (x.meta.shape != p.meta.shape || x.meta.dtype != p.meta.dtype || y.meta.dtype != p.meta.dtype || !aux_layout(x))
    return false;
  const Value &a = g.values[size_t(m.inputs[0])], &b = g.values[size_t(m.inputs[1])];
  return a.meta.dtype == p.meta.dtype && b.meta.dtype == p.meta.dtype &&
         cublas_bias_epilogue_applies(a.meta.shape, a.strides, b.meta.shape, b.strides, p.meta.shape);
}

}  // namespace

int cublas_gelu_epilogues(Graph& g) {
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  // forward[m]: the gelu node folded into matmul_bias node m; backward[n]: gelu_backward node n
  // takes its gradient product's node into it.
  std::vector<int> forward(g.nodes.size(), -1);
  std::vector<bool> backward(g.nodes.size(), false), dropped(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (backward_fold(g, n, readers, outputs)) {
      backward[i] = true, dropped[size_t(g.values[size_t(n.inputs[0])].producer)] = true;
      ++count;
      continue;
    }
    if (!tanh_gelu(n, "gelu") || n.inputs.size() != 1) continue;
    const Value &x = g.values[size_t(n.inputs[0])], &y = g.values[size_t(n.outputs[0])];
    if (x.producer < 0 || forward[size_t(x.producer)] >= 0) continue;
    const GraphNode& m = g.nodes[size_t(x.producer)];
    if (m.op->name != "matmul_bias" || !x.meta.device.is_cuda() || !lt_dtype(x.meta.dtype) ||
        y.meta.dtype != x.meta.dtype || y.meta.shape != x.meta.shape)
      continue;
    bool aux = outputs.count(n.inputs[0]) || readers[size_t(n.inputs[0])].size() > 1;
    if (aux && !aux_layout(x)) continue;
    forward[size_t(x.producer)] = int(i), dropped[i] = true;
    ++count;
  }
  if (count == 0) return 0;
  static const OpDef& matmul_bias_gelu = op_def("matmul_bias_gelu");
  static const OpDef& matmul_gelu_backward = op_def("matmul_gelu_backward");
  const Attrs tanh{{"approximate", std::string("tanh")}};
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (forward[i] >= 0) {  // at the product's place: other readers of GELU's input may come before gelu
      const GraphNode& gelu = g.nodes[size_t(forward[i])];
      int x = n.outputs[0];
      bool aux = outputs.count(x) || readers[size_t(x)].size() > 1;
      Attrs attrs = tanh;
      attrs.set("aux", aux);
      size_t mark = r.out.nodes.size();
      std::vector<int> outs = r.out.add_inferred_node(matmul_bias_gelu, attrs, r.ids(n.inputs));
      for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = gelu.grad_enabled;
      r.set(gelu.outputs[0], outs[0]);
      if (aux) r.set(x, outs[1]);
    } else if (backward[i]) {
      const GraphNode& m = g.nodes[size_t(g.values[size_t(n.inputs[0])].producer)];
      std::vector<int> ins = r.ids({m.inputs[0], m.inputs[1], n.inputs[1]});
      size_t mark = r.out.nodes.size();
      int out = r.out.add_inferred_node(matmul_gelu_backward, tanh, ins)[0];
      for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
      r.set(n.outputs[0], out);
    } else if (!dropped[i]) {
      r.copy(n);
    }
  }
  g = std::move(r).finish();
  return count;
}

}  // namespace kiln
