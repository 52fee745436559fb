// cublas_gemm_operands (graph/passes.h): on CUDA, the matmul operands that the eager matmul would
// copy before its cuBLAS call (cublas_dense_copies: matrices neither row- nor column-major) become
// `contiguous` nodes of the graph, so that a pipeline makes the copies; a matrix stored by
// columns (K^T) is copied as its transpose and viewed back.
#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

int cublas_gemm_operands(Graph& g) {
  std::vector<std::array<bool, 2>> copies(g.nodes.size(), {false, false});
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (!n.op->gemm || n.inputs.size() != 2) continue;
    const Value &a = g.values[size_t(n.inputs[0])], &b = g.values[size_t(n.inputs[1])];
    const Value& out = g.values[size_t(n.outputs[0])];
    // Operands of another dtype are converted, hence dense, before the GEMM.
    if (!out.meta.device.is_cuda() || a.meta.dtype != out.meta.dtype || b.meta.dtype != out.meta.dtype) continue;
    copies[i] = cublas_dense_copies(a.meta.shape, a.strides, b.meta.shape, b.strides, out.meta.shape);
    count += copies[i][0] + copies[i][1];
  }
  if (count == 0) return 0;
  static const OpDef& contiguous = op_def("contiguous");
  static const OpDef& transpose = op_def("transpose");
  const Attrs swap{{"dim0", int64_t(-1)}, {"dim1", int64_t(-2)}};
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (!copies[i][0] && !copies[i][1]) {
      r.copy(n);
      continue;
    }
    std::vector<int> ins = r.ids(n.inputs);
    size_t mark = r.out.nodes.size();
    for (size_t k = 0; k < 2; ++k) {
      if (!copies[i][k]) continue;
      // As dense_copy: a matrix stored by columns is copied as its transpose, then viewed back.
      const Value& x = g.values[size_t(n.inputs[k])];
      bool by_columns = stored_by_columns(x.meta.shape, x.strides);
      int v = ins[k];
      if (by_columns) v = r.out.add_inferred_node(transpose, swap, {v})[0];
      v = r.out.add_inferred_node(contiguous, {}, {v})[0];
      if (by_columns) v = r.out.add_inferred_node(transpose, swap, {v})[0];
      ins[k] = v;
    }
    std::vector<int> outs = r.out.add_inferred_node(*n.op, n.attrs, ins);
    for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
    for (size_t k = 0; k < outs.size(); ++k) r.set(n.outputs[k], outs[k]);
  }
  g = std::move(r).finish();
  return count;
}

}  // namespace kiln
