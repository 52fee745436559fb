// cublas_bias_epilogue (graph/passes.h): on CUDA, add(matmul(a, b), bias) with a bias along the
// product's last dim becomes matmul_bias(a, b, bias), which cuBLASLt computes with the bias added
// in its epilogue: the product is written once, with no pass of its own to add the bias. Where the
// backend fuses and every reader of the sum is a pointwise op (a residual add before layer_norm,
// an erf GELU), the bias joins their pipeline instead, where it costs no pass either: cuBLASLt's
// bias GEMMs at small sizes were slower than its plain ones (tiny_gpt's [512, 256] x [256, 64]
// with its bias ran as a split-K GEMM and its reduction, 9.2 us on an H100, where plain GEMMs of
// its size took 3.5).
#include <optional>

#include "dsl/eager/matmul.h"
#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// "add(matmul [8192, 768] x [768, 2304], [2304])": the add node n of product `product` in notes.
std::string describe(const Graph& g, const GraphNode& n, int product, int bias) {
  const GraphNode& m = g.nodes[size_t(g.values[size_t(product)].producer)];
  auto shape = [&](int v) { return to_string(g.values[size_t(v)].meta.shape); };
  return "add(matmul " + shape(m.inputs[0]) + " x " + shape(m.inputs[1]) + ", " + shape(bias) + ")";
}

// Whether every reader of add node n's sum is a pointwise op that a pipeline computes (not a
// random draw, and not a tanh GELU, which cublas_gelu_epilogues moves into the GEMM's epilogue
// with the bias).
bool read_by_pipelines_only(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                            const std::set<int>& outputs) {
  int sum = n.outputs[0];
  if (outputs.count(sum) || readers[size_t(sum)].empty()) return false;
  for (int r : readers[size_t(sum)]) {
    const GraphNode& reader = g.nodes[size_t(r)];
    if (!reader.op->pointwise || reader.op->random) return false;
    if (reader.op->name == "gelu" && reader.attrs.get_or<std::string>("approximate", "none") == "tanh") return false;
  }
  return true;
}

// Why add node n keeps apart from the matmul whose product it reads ("" when they fold: `matmul`
// and `bias_input` then say which product and which input of n is the bias); nullopt when n is no
// add of a matmul's product on CUDA.
std::optional<std::string> bias_fold(const Graph& g, const GraphNode& n, const std::vector<std::vector<int>>& readers,
                                     const std::set<int>& outputs, bool fused_readers, int& matmul, int& bias_input) {
  if (n.op->name != "add" || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
  const Value& sum = g.values[size_t(n.outputs[0])];
  if (!sum.meta.device.is_cuda()) return std::nullopt;
  std::optional<std::string> why;
  for (int k = 0; k < 2; ++k) {
    int product = n.inputs[size_t(k)], bias = n.inputs[size_t(1 - k)];
    const Value &p = g.values[size_t(product)], &b = g.values[size_t(bias)];
    if (p.producer < 0) continue;
    const GraphNode& m = g.nodes[size_t(p.producer)];
    if (m.op->name != "matmul" || m.outputs.size() != 1) continue;
    const Value &x = g.values[size_t(m.inputs[0])], &w = g.values[size_t(m.inputs[1])];
    std::string reason;
    if (outputs.count(product) || readers[size_t(product)].size() != 1)
      reason = "the product is read elsewhere";
    else if (p.meta.shape.empty() || b.meta.shape != Shape{p.meta.shape.back()} || sum.meta.shape != p.meta.shape)
      reason = "the other operand is not a bias along the product's last dim";
    else if (b.meta.dtype != p.meta.dtype || sum.meta.dtype != p.meta.dtype || x.meta.dtype != p.meta.dtype ||
             w.meta.dtype != p.meta.dtype)
      reason = "mixed dtypes";
    else if (!cublas_bias_epilogue_applies(x.meta.shape, x.strides, w.meta.shape, w.strides, p.meta.shape))
      reason = "cuBLASLt cannot read the operands in place as one matrix product";
    else if (fused_readers && read_by_pipelines_only(g, n, readers, outputs))
      reason = "its readers are pointwise: the bias is added in their pipeline";
    if (reason.empty()) {
      matmul = p.producer, bias_input = k == 0 ? 1 : 0;
      return "";
    }
    if (!why) why = describe(g, n, product, bias) + ": kept apart, " + reason;
  }
  return why;
}

}  // namespace

int cublas_bias_epilogue(Graph& g, std::vector<std::string>* notes, bool fused_readers) {
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  std::vector<int> folds(g.nodes.size(), -1), bias_of(g.nodes.size(), -1);
  std::vector<bool> dropped(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int m = -1, bias = -1;
    std::optional<std::string> why = bias_fold(g, g.nodes[i], readers, outputs, fused_readers, m, bias);
    if (!why) continue;
    if (notes)
      notes->push_back(m < 0 ? *why : describe(g, g.nodes[i], g.nodes[i].inputs[size_t(1 - bias)], g.nodes[i].inputs[size_t(bias)]) +
                                         ": bias added in cuBLASLt's epilogue");
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
