// cublas_gelu_epilogues (graph/passes.h): on CUDA, GELU in its tanh form moves into the epilogue of
// the cuBLASLt GEMM beside it, forward and backward.
#include <optional>

#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// cuBLASLt's GELU epilogues take f32 (TF32 too), f16 and bf16.
bool lt_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// GELU's input as cuBLASLt stores or reads it beside the product: dense rows whose length is a
// multiple of 8 (its leading dimension's rule).
bool aux_layout(const Value& v) {
  return !v.meta.shape.empty() && v.meta.shape.back() % 8 == 0 && v.strides == contiguous_strides(v.meta.shape);
}

// Whether GELU's input x is read by more than the GELU (the backward's gelu_backward), so that the
// epilogue also stores it (aux).
bool stores_input(int x, const std::vector<std::vector<int>>& readers, const std::set<int>& outputs) {
  return outputs.count(x) || readers[size_t(x)].size() > 1;
}

// "matmul [8192, 768] x [768, 3072]": product node m in notes.
std::string describe_product(const Graph& g, const GraphNode& m) {
  auto shape = [&](int v) { return to_string(g.values[size_t(v)].meta.shape); };
  return m.op->name + " " + shape(m.inputs[0]) + " x " + shape(m.inputs[1]);
}

// The reason a GELU kept apart from its product cannot fold that GELU and product share ("" when
// none): the form, the dtypes and, where GELU's input is also stored (aux), its layout.
std::string gelu_reason(const GraphNode& n, const Value& x, const Value& y, bool aux) {
  if (n.attrs.get_or<std::string>("approximate", "none") != "tanh") return "erf GELU (cuBLASLt's epilogues compute the tanh form)";
  if (!lt_dtype(x.meta.dtype)) return "dtype " + std::string(name(x.meta.dtype)) + " (cuBLASLt's GELU epilogues take f32, f16, bf16)";
  if (y.meta.dtype != x.meta.dtype || y.meta.shape != x.meta.shape) return "GELU changes the dtype or shape";
  if (aux && !aux_layout(x)) return "GELU's input is not stored as dense rows a multiple of 8 long";
  return "";
}

// Why gelu_backward node n keeps apart from the matmul that computes its gradient ("" when they
// fold); nullopt when n is no gelu_backward of a matmul's product on CUDA.
std::optional<std::string> backward_fold(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                                         const std::set<int>& outputs) {
  if (n.op->name != "gelu_backward" || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
  int grad = n.inputs[0];
  const Value &p = g.values[size_t(grad)], &x = g.values[size_t(n.inputs[1])], &y = g.values[size_t(n.outputs[0])];
  if (p.producer < 0 || !p.meta.device.is_cuda()) return std::nullopt;
  const GraphNode& m = g.nodes[size_t(p.producer)];
  if (m.op->name != "matmul" || m.outputs.size() != 1) return std::nullopt;
  const Value &a = g.values[size_t(m.inputs[0])], &b = g.values[size_t(m.inputs[1])];
  std::string reason = gelu_reason(n, x, y, true);
  if (!reason.empty()) {
  } else if (outputs.count(grad) || readers[size_t(grad)].size() != 1) {
    reason = "the product is read elsewhere";
  } else if (x.meta.shape != p.meta.shape || x.meta.dtype != p.meta.dtype || a.meta.dtype != p.meta.dtype ||
             b.meta.dtype != p.meta.dtype) {
    reason = "GELU's input and the product differ in shape or dtype";
  } else if (!cublas_bias_epilogue_applies(a.meta.shape, a.strides, b.meta.shape, b.strides, p.meta.shape)) {
    reason = "cuBLASLt cannot read the operands in place as one matrix product";
  }
  return reason.empty() ? reason : "gelu_backward(" + describe_product(g, m) + "): kept apart, " + reason;
}

// Why gelu node n keeps apart from the GEMM that computes its input ("" when they fold); nullopt
// when n is no gelu of a matmul's or matmul_bias's product on CUDA. `folded[m]` >= 0: product
// node m's epilogue already takes a GELU.
std::optional<std::string> forward_fold(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                                        const std::set<int>& outputs, const std::vector<int>& folded) {
  if (n.op->name != "gelu" || n.inputs.size() != 1) return std::nullopt;
  const Value &x = g.values[size_t(n.inputs[0])], &y = g.values[size_t(n.outputs[0])];
  if (x.producer < 0 || !x.meta.device.is_cuda()) return std::nullopt;
  const GraphNode& m = g.nodes[size_t(x.producer)];
  if (m.op->name != "matmul_bias" && m.op->name != "matmul") return std::nullopt;
  std::string reason = gelu_reason(n, x, y, stores_input(n.inputs[0], readers, outputs));
  if (!reason.empty()) {
  } else if (m.op->name == "matmul") {
    reason = "the product has no bias epilogue (cuBLASLt's GELU epilogue is taken with a bias)";
  } else if (folded[size_t(x.producer)] >= 0) {
    reason = "the product's epilogue already computes a GELU";
  }
  return reason.empty() ? reason : "gelu(" + describe_product(g, m) + "): kept apart, " + reason;
}

}  // namespace

int cublas_gelu_epilogues(Graph& g, std::vector<std::string>* notes) {
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  // forward[m]: the gelu node folded into matmul_bias node m; backward[n]: gelu_backward node n
  // takes its gradient product's node into it.
  std::vector<int> forward(g.nodes.size(), -1);
  std::vector<bool> backward(g.nodes.size(), false), dropped(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    std::optional<std::string> why = backward_fold(g, n, readers, outputs);
    bool folds = why && why->empty();
    if (folds) {
      backward[i] = true, dropped[size_t(g.values[size_t(n.inputs[0])].producer)] = true;
      why = "gelu_backward(" + describe_product(g, g.nodes[size_t(g.values[size_t(n.inputs[0])].producer)]) +
            "): GELU's gradient taken in cuBLASLt's epilogue (DGELU)";
    } else if (!why) {
      why = forward_fold(g, n, readers, outputs, forward);
      folds = why && why->empty();
      if (folds) {
        int m = g.values[size_t(n.inputs[0])].producer;
        forward[size_t(m)] = int(i), dropped[i] = true;
        why = "gelu(" + describe_product(g, g.nodes[size_t(m)]) + "): GELU computed in cuBLASLt's epilogue";
      }
    }
    if (!why) continue;
    count += folds;
    if (notes) notes->push_back(*why);
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
      bool aux = stores_input(x, readers, outputs);
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
