// merge_attention_heads (graph/passes.h): a transformer merges attention's heads by
//   o = attention(q, k, v)[0]             [B, H, T, Dv]
//   y = contiguous(transpose(o, 1, 2))    [B, T, H, Dv], a copy of the whole output
//   flatten(y) -> [B, T, H * Dv]
// The attention kernels can write o straight in [B, T, H, Dv] order (the `merged_heads` attribute,
// dsl/ops/attention.cpp): the copy goes, and y is the attention's output itself. Where something
// else reads o (the backward's attention_backward, an eager step that takes any strides), it
// reads a transposed view of the new output, [B, H, T, Dv] again. Any other reader of o or of the
// transpose (a view, a region, a graph output) leaves the attention as it is: their recorded
// layouts would no longer hold.
#include <optional>

#include "dsl/op_def.h"
#include "graph/passes.h"

namespace kiln {

namespace {

// A transpose of a rank-4 value that swaps dims 1 and 2 (heads and rows).
bool swaps_heads_and_rows(const GraphNode& n) {
  if (n.op->name != "transpose") return false;
  int64_t a = n.attrs.get<int64_t>("dim0"), b = n.attrs.get<int64_t>("dim1");
  a = a < 0 ? a + 4 : a;
  b = b < 0 ? b + 4 : b;
  return (a == 1 && b == 2) || (a == 2 && b == 1);
}

// The contiguous nodes whose output the attention's new output becomes.
struct Plan {
  std::vector<int> copies;
};

// How node i's output 0 would be rewritten, or nothing.
std::optional<Plan> plan_for(const Graph& g, const std::vector<std::vector<int>>& readers,
                             const std::vector<bool>& returned, const GraphNode& n) {
  if (n.op->name != "attention" || n.attrs.get_or<bool>("merged_heads", false)) return std::nullopt;
  const int o = n.outputs[0];
  if (returned[size_t(o)] || g.values[size_t(o)].meta.shape.size() != 4) return std::nullopt;
  Plan p;
  for (int r : readers[size_t(o)]) {
    const GraphNode& reader = g.nodes[size_t(r)];
    if (reader.op->name == "attention_backward") continue;  // takes any strides
    if (!swaps_heads_and_rows(reader) || returned[size_t(reader.outputs[0])]) return std::nullopt;
    for (int c : readers[size_t(reader.outputs[0])]) {
      if (g.nodes[size_t(c)].op->name != "contiguous") return std::nullopt;
      p.copies.push_back(c);
    }
  }
  if (p.copies.empty()) return std::nullopt;
  return p;
}

}  // namespace

int merge_attention_heads(Graph& g) {
  const std::vector<std::vector<int>> readers = readers_of(g);
  std::vector<bool> returned(g.values.size(), false);
  for (int v : g.outputs) returned[size_t(v)] = true;
  std::vector<std::optional<Plan>> plans(g.nodes.size());
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    plans[i] = plan_for(g, readers, returned, g.nodes[i]);
    count += plans[i].has_value();
  }
  if (count == 0) return 0;
  static const OpDef& transpose = op_def("transpose");
  // The copies that the new outputs stand for, by node: skipped when the rewrite reaches them.
  std::vector<int> copy_of(g.nodes.size(), -1);
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (copy_of[i] >= 0) {
      r.set(n.outputs[0], copy_of[i]);
      continue;
    }
    if (!plans[i]) {
      r.copy(n);
      continue;
    }
    size_t mark = r.out.nodes.size();
    Attrs attrs = n.attrs;
    attrs.set("merged_heads", true);
    std::vector<int> outs = r.out.add_inferred_node(*n.op, attrs, r.ids(n.inputs));
    for (int c : plans[i]->copies) copy_of[size_t(c)] = outs[0];
    // What the other readers see: the [B, H, T, Dv] view of the merged output (dropped with the
    // old transposes where nothing else reads it).
    int heads_first = r.out.add_inferred_node(transpose, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}}, {outs[0]})[0];
    for (size_t k = mark; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
    r.set(n.outputs[0], heads_first);
    r.set(n.outputs[1], outs[1]);
  }
  g = std::move(r).finish();
  eliminate_dead_code(g);  // the transposes the copies read
  return count;
}

}  // namespace kiln
