#include <bit>
#include <map>
#include <utility>
#include <variant>

#include "graph/passes.h"

namespace kiln {

namespace {

// Exact: doubles compare by their bits, so 0.0 and -0.0 stay apart and a NaN equals itself.
bool same_value(const AttrValue& a, const AttrValue& b) {
  const double* x = std::get_if<double>(&a);
  const double* y = std::get_if<double>(&b);
  if (x && y) return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(*y);
  return a == b;
}

bool same_attrs(const Attrs& a, const Attrs& b) {
  const auto &x = a.items(), &y = b.items();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].first != y[i].first || !same_value(x[i].second, y[i].second)) return false;
  return true;
}

}  // namespace

int eliminate_common_subexpressions(Graph& g) {
  std::vector<int> repl(g.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = int(v);
  // (op, inputs) -> the earlier nodes with that signature.
  std::map<std::pair<const OpDef*, std::vector<int>>, std::vector<int>> seen;
  int merged = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    GraphNode& node = g.nodes[n];
    for (int& v : node.inputs) v = repl[v];
    if (node.op->effectful()) continue;
    std::vector<int>& same = seen[{node.op, node.inputs}];
    int match = -1;
    for (int m : same)
      if (same_attrs(g.nodes[m].attrs, node.attrs)) match = m;
    if (match < 0) {
      same.push_back(int(n));
      continue;
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) repl[node.outputs[k]] = g.nodes[match].outputs[k];
    ++merged;
  }
  for (int& v : g.outputs) v = repl[v];
  if (merged) eliminate_dead_code(g);
  return merged;
}

}  // namespace kiln
