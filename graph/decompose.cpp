#include <functional>
#include <map>

#include "dsl/composite_math.h"
#include "dsl/error.h"
#include "graph/emitter.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// The rules compute in f32 (f64 for f64 inputs), like the fused kernels, and cast the result back
// to the composite's output dtype (Emitter: graph/emitter.h).

// A rule returns the value that replaces the node's output, or -1 to keep the node as it is.
using Rule = std::function<int(Emitter&, const GraphNode&, const std::vector<int>& ins)>;

int64_t rank_of(const Emitter& e, int x) { return int64_t(e.g.values[x].meta.shape.size()); }

// The row dim of softmax/log_softmax, or -1 when rows are empty: max has no identity there. A
// symbolic row dim is taken to be nonzero, its hint.
int64_t row_dim(const Emitter& e, const GraphNode& n, int x) {
  int64_t rank = rank_of(e, x);
  if (rank == 0) return 0;
  int d = wrap_dim(n.op->name, n.attrs.get<int64_t>("dim"), rank);
  return e.g.values[x].meta.shape[d] == 0 ? -1 : d;
}

// (x - max) and the row dims (empty for a 0-d x: reduce over everything).
std::pair<int, std::vector<int64_t>> shifted_rows(Emitter& e, int x, int64_t d) {
  std::vector<int64_t> dims;
  if (rank_of(e, x) > 0) dims.push_back(d);
  return {e.op("sub", {x, e.reduce("max", x, dims)}), dims};
}

int softmax_rule(Emitter& e, const GraphNode& n, const std::vector<int>& ins) {
  int64_t d = row_dim(e, n, ins[0]);
  if (d < 0) return -1;
  int x = e.cast(ins[0], e.compute);
  auto [s, dims] = shifted_rows(e, x, d);
  int ex = e.op("exp", {s});
  return e.op("div", {ex, e.reduce("sum", ex, dims)});
}

int log_softmax_rule(Emitter& e, const GraphNode& n, const std::vector<int>& ins) {
  int64_t d = row_dim(e, n, ins[0]);
  if (d < 0) return -1;
  int x = e.cast(ins[0], e.compute);
  auto [s, dims] = shifted_rows(e, x, d);
  int log_sum = e.op("log", {e.reduce("sum", e.op("exp", {s}), dims)});
  return e.op("sub", {s, log_sum});  // (x - max) - log_sum, the order of the fused kernel
}

int layer_norm_rule(Emitter& e, const GraphNode& n, const std::vector<int>& ins) {
  Emitted x{&e, e.cast(ins[0], e.compute)};
  int64_t rank = rank_of(e, x.v);
  int64_t k = int64_t(n.attrs.get<std::vector<int64_t>>("normalized_shape").size());
  std::vector<int64_t> dims;
  for (int64_t d = rank - k; d < rank; ++d) dims.push_back(d);
  Emitted y = normalize_rows(x, dims, n.attrs.get<double>("eps")).xhat;
  if (ins.size() == 3) y = y * Emitted{&e, ins[1]} + Emitted{&e, ins[2]};
  return y.v;
}

// Only the tanh form decomposes; gelu(approximate="none") stays one op (its erf is one
// expression either way).
int gelu_rule(Emitter& e, const GraphNode& n, const std::vector<int>& ins) {
  if (n.attrs.get_or<std::string>("approximate", "none") != "tanh") return -1;
  int x = e.cast(ins[0], e.compute);
  int cube = e.op("mul", {e.op("square", {x}), x});
  int inner = e.op("add", {x, e.op("mul", {e.constant(kGeluCubic), cube})});
  int t = e.op("tanh", {e.op("mul", {e.constant(kGeluScale), inner})});
  int half_x = e.op("mul", {e.constant(0.5), x});
  return e.op("mul", {half_x, e.op("add", {e.constant(1.0), t})});
}

int silu_rule(Emitter& e, const GraphNode& n, const std::vector<int>& ins) {
  int x = e.cast(ins[0], e.compute);
  return e.op("mul", {x, e.op("sigmoid", {x})});
}

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> table = {
      {"softmax", softmax_rule}, {"log_softmax", log_softmax_rule}, {"layer_norm", layer_norm_rule},
      {"gelu", gelu_rule},       {"silu", silu_rule},
  };
  return table;
}

}  // namespace

std::vector<std::string> default_decompositions() {
  std::vector<std::string> names;
  for (const auto& [name, rule] : rules()) names.push_back(name);
  return names;
}

int decompose(Graph& g, const std::set<std::string>& ops) {
  GraphRewrite r(g);
  Graph& out = r.out;
  int decomposed = 0;
  for (const GraphNode& node : g.nodes) {
    auto rule = rules().find(node.op->name);
    if (ops.count(node.op->name) && rule != rules().end()) {
      const TensorMeta& want = g.values[node.outputs[0]].meta;
      Emitter e{out, want.device, want.dtype == DType::f64 ? DType::f64 : DType::f32};
      size_t mark = out.nodes.size();
      int y = rule->second(e, node, r.ids(node.inputs));
      if (y >= 0) {
        r.replace(node, mark, {e.cast(y, want.dtype)}, "decompose");
        ++decomposed;
        continue;
      }
      KILN_CHECK(out.nodes.size() == mark, "decompose: ", node.op->name, " declined after emitting nodes");
    }
    r.copy(node);
  }
  g = std::move(r).finish();
  return decomposed;
}

}  // namespace kiln
