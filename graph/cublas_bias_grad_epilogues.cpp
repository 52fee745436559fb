// cublas_bias_grad_epilogues (graph/passes.h): on CUDA, a Linear's bias gradient, the sum of its
// output gradient over every dim but the last, is summed by cuBLASLt in the epilogue of the weight
// gradient's GEMM, which reads that gradient anyway (as its transpose, flattened).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// A sum of dy over all its dims but the last paired with the weight gradient's product.
struct Fold {
  int sum = -1, matmul = -1;
  int at() const { return std::min(sum, matmul); }
};

// Why sum node s, a sum of a CUDA dy over every dim but the last, cannot be a GEMM's bias
// gradient ("" when it can); nullopt for any other node.
std::optional<std::string> sums_leading_dims(const Graph& g, const GraphNode& s) {
  if (s.op->name != "sum" || s.inputs.size() != 1) return std::nullopt;
  const Value &dy = g.values[size_t(s.inputs[0])], &out = g.values[size_t(s.outputs[0])];
  const Shape& shape = dy.meta.shape;
  if (shape.size() < 2 || !dy.meta.device.is_cuda() || numel(out.meta.shape) != shape.back()) return std::nullopt;
  std::vector<int64_t> dims = s.attrs.get_or<std::vector<int64_t>>("dims", {});
  if (dims.size() != shape.size() - 1) return std::nullopt;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != int64_t(d) && dims[d] != int64_t(d) - int64_t(shape.size())) return std::nullopt;
  if (out.meta.dtype != dy.meta.dtype) return "the sum changes the dtype";
  if (dy.meta.dtype != DType::f32 && dy.meta.dtype != DType::f16 && dy.meta.dtype != DType::bf16)
    return "dtype " + std::string(name(dy.meta.dtype)) + " (cuBLASLt's BGRADB takes f32, f16, bf16)";
  for (const SymDim& d : dy.sym)
    if (!d.is_static()) return "dynamic shape (the bias gradient's view takes static sizes)";
  return "";
}

// Where base's producer sits (-1 for a graph input).
int position(const Graph& g, int v) { return g.values[size_t(v)].producer; }

}  // namespace

int cublas_bias_grad_epilogues(Graph& g, std::vector<std::string>* notes) {
  auto shape = [&](int v) { return to_string(g.values[size_t(v)].meta.shape); };
  // The sums by the dy they read, and why each is kept apart so far.
  std::map<int, int> sum_of;
  std::map<int, std::string> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::optional<std::string> why = sums_leading_dims(g, g.nodes[i]);
    if (!why) continue;
    if (why->empty())
      sum_of.emplace(g.nodes[i].inputs[0], int(i)), kept[int(i)] = "no GEMM reads dy transposed (not a Linear's bias gradient)";
    else
      kept[int(i)] = *why;
  }
  std::vector<Fold> folds;
  for (size_t i = 0; i < g.nodes.size() && !sum_of.empty(); ++i) {
    const GraphNode& m = g.nodes[i];
    if (m.op->name != "matmul" || m.inputs.size() != 2) continue;
    const Value &a = g.values[size_t(m.inputs[0])], &b = g.values[size_t(m.inputs[1])];
    const Value& p = g.values[size_t(m.outputs[0])];
    auto it = sum_of.find(view_base(g, m.inputs[0]));
    if (it == sum_of.end() || !kept.count(it->second) || !transposes_flattened(g, it->first, m.inputs[0])) continue;
    std::string& why = kept[it->second];
    if (p.meta.dtype != a.meta.dtype || b.meta.dtype != a.meta.dtype) {
      why = "the GEMM reading dy^T mixes dtypes";
      continue;
    }
    if (!cublas_bias_epilogue_applies(a.meta.shape, a.strides, b.meta.shape, b.strides, p.meta.shape)) {
      why = "cuBLASLt cannot read the operands of the GEMM reading dy^T in place";
      continue;
    }
    Fold f{it->second, int(i)};
    // The GEMM runs where the earlier of the two ran: what it reads must exist by then.
    if (position(g, view_base(g, m.inputs[1])) >= f.at()) {
      why = "the GEMM's other operand is made after the sum";
      continue;
    }
    kept.erase(f.sum);
    folds.push_back(f);
    if (notes)
      notes->push_back("sum of " + shape(it->first) + " over its leading dims: summed in the epilogue (BGRADB) of matmul " +
                       shape(m.inputs[0]) + " x " + shape(m.inputs[1]));
  }
  if (notes)
    for (const auto& [sum, why] : kept)
      notes->push_back("sum of " + shape(g.nodes[size_t(sum)].inputs[0]) + " over its leading dims: kept apart, " + why);
  if (folds.empty()) return 0;
  std::map<int, Fold> at;  // by the node where each fold's GEMM is emitted
  std::set<int> dropped;
  for (const Fold& f : folds) at[f.at()] = f, dropped.insert(f.sum), dropped.insert(f.matmul);
  static const OpDef& matmul_bias_grad = op_def("matmul_bias_grad");
  static const OpDef& view = op_def("view");
  GraphRewrite r(g);
  // Emits v's view chain again from its base (views are free): an operand read before the node
  // that made it in the old graph.
  auto operand = [&](int v) {
    int out = r.id(view_base(g, v));
    for (int n : view_chain(g, v)) out = r.out.add_inferred_node(*g.nodes[size_t(n)].op, g.nodes[size_t(n)].attrs, {out})[0];
    return out;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    auto f = at.find(int(i));
    if (f != at.end()) {
      const GraphNode &s = g.nodes[size_t(f->second.sum)], &m = g.nodes[size_t(f->second.matmul)];
      size_t mark = r.out.nodes.size();
      int a = operand(m.inputs[0]), b = operand(m.inputs[1]);
      std::vector<int> outs = r.out.add_inferred_node(matmul_bias_grad, {}, {a, b});
      const Value& summed = g.values[size_t(s.outputs[0])];
      int bias = r.out.add_inferred_node(view, {{"shape", summed.meta.shape}}, {outs[1]})[0];
      for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = m.grad_enabled;
      r.set(m.outputs[0], outs[0]);
      r.set(s.outputs[0], bias);
    }
    if (!dropped.count(int(i))) r.copy(n);
  }
  g = std::move(r).finish();
  return int(folds.size());
}

}  // namespace kiln
