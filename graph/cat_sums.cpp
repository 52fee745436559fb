#include "graph/passes.h"

#include <algorithm>
#include <map>

namespace kiln {

namespace {

// A piece of a cat along its dim: [begin, end), and the value it holds there (-1: zeros).
struct Piece {
  int64_t begin, end;
  int value;
};

bool is_zeros(const Graph& g, int v) {
  int p = g.values[size_t(v)].producer;
  if (p < 0) return false;
  const GraphNode& n = g.nodes[size_t(p)];
  return n.op->name == "full" && n.attrs.get<double>("value") == 0.0;
}

bool all_static(const Graph& g, int v) {
  for (const SymDim& d : g.values[size_t(v)].sym)
    if (!d.is_static()) return false;
  return true;
}

// The pieces of v when it is a cat of static shape along `dim`; empty otherwise.
std::vector<Piece> cat_pieces(const Graph& g, int v, int64_t& dim) {
  int p = g.values[size_t(v)].producer;
  if (p < 0 || g.nodes[size_t(p)].op->name != "cat" || !all_static(g, v)) return {};
  const GraphNode& n = g.nodes[size_t(p)];
  int64_t rank = int64_t(g.values[size_t(v)].meta.shape.size());
  dim = n.attrs.get<int64_t>("dim");
  if (dim < 0) dim += rank;
  std::vector<Piece> out;
  int64_t at = 0;
  for (int x : n.inputs) {
    if (g.values[size_t(x)].meta.dtype != g.values[size_t(v)].meta.dtype) return {};
    int64_t len = g.values[size_t(x)].meta.shape[size_t(dim)];
    if (len > 0) out.push_back({at, at + len, is_zeros(g, x) ? -1 : x});
    at += len;
  }
  return out;
}

// n = add(cat(a...), cat(b...)) along one dim, one dtype and shape, some pieces zeros.
bool sums_padded_cats(const Graph& g, const GraphNode& n) {
  if (n.op->name != "add" || n.inputs.size() != 2 || !n.attrs.items().empty()) return false;
  int64_t da = -1, db = -2;
  std::vector<Piece> a = cat_pieces(g, n.inputs[0], da), b = cat_pieces(g, n.inputs[1], db);
  if (a.empty() || b.empty() || da != db) return false;
  const Value &va = g.values[size_t(n.inputs[0])], &vb = g.values[size_t(n.inputs[1])], &out = g.values[size_t(n.outputs[0])];
  if (va.meta.shape != vb.meta.shape || va.meta.shape != out.meta.shape || va.meta.dtype != out.meta.dtype) return false;
  auto zeros = [](const std::vector<Piece>& ps) {
    return std::any_of(ps.begin(), ps.end(), [](const Piece& p) { return p.value < 0; });
  };
  return zeros(a) || zeros(b);
}

// One sweep: each add of two padded cats becomes one cat; an add of such an add is caught by the
// next sweep (the inner add is a cat by then).
int merge_once(Graph& g) {
  std::vector<bool> rewrite(g.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (sums_padded_cats(g, g.nodes[i])) rewrite[i] = true, ++count;
  if (count == 0) return 0;
  static const OpDef &cat = op_def("cat"), &add = op_def("add"), &slice = op_def("slice"), &full = op_def("full");
  GraphRewrite r(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (!rewrite[i]) {
      r.copy(n);
      continue;
    }
    size_t first = r.out.nodes.size();
    int64_t dim = 0;
    std::vector<Piece> a = cat_pieces(g, n.inputs[0], dim), b = cat_pieces(g, n.inputs[1], dim);
    std::vector<int64_t> cuts;
    for (const auto* ps : {&a, &b})
      for (const Piece& p : *ps) cuts.push_back(p.begin), cuts.push_back(p.end);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    // The part [lo, hi) of an operand (a new id): its piece there, a slice of it, or -1 for zeros.
    auto part = [&](const std::vector<Piece>& ps, int64_t lo, int64_t hi) {
      for (const Piece& p : ps) {
        if (p.end <= lo || p.begin >= hi) continue;
        if (p.value < 0) return -1;
        if (p.begin == lo && p.end == hi) return r.id(p.value);
        Attrs at{{"dim", dim}, {"start", lo - p.begin}, {"end", hi - p.begin}, {"step", int64_t(1)}};
        return r.out.add_inferred_node(slice, at, {r.id(p.value)})[0];
      }
      return -1;
    };
    std::vector<Piece> sum;  // new ids
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      int64_t lo = cuts[k], hi = cuts[k + 1];
      int x = part(a, lo, hi), y = part(b, lo, hi);
      int v = x < 0 ? y : y < 0 ? x : r.out.add_inferred_node(add, {}, {x, y})[0];
      if (v < 0 && !sum.empty() && sum.back().value < 0) sum.back().end = hi;  // neighbouring zeros: one block
      else sum.push_back({lo, hi, v});
    }
    const Value& out = g.values[size_t(n.outputs[0])];
    std::vector<int> inputs;
    for (const Piece& p : sum) {
      if (p.value >= 0) {
        inputs.push_back(p.value);
        continue;
      }
      Shape shape = out.meta.shape;
      shape[size_t(dim)] = p.end - p.begin;
      Attrs z{{"shape", shape}, {"value", 0.0}, {"dtype", std::string(name(out.meta.dtype))},
              {"device", out.meta.device.str()}};
      inputs.push_back(r.out.add_inferred_node(full, z, {})[0]);
    }
    int result = inputs.size() == 1 ? inputs[0] : r.out.add_inferred_node(cat, {{"dim", dim}}, inputs)[0];
    for (size_t k = first; k < r.out.nodes.size(); ++k) r.out.nodes[k].grad_enabled = n.grad_enabled;
    r.set(n.outputs[0], result);
  }
  g = std::move(r).finish();
  eliminate_dead_code(g);
  return count;
}

}  // namespace

int merge_padded_cat_sums(Graph& g) {
  int total = 0;
  while (int n = merge_once(g)) total += n;
  return total;
}

}  // namespace kiln
