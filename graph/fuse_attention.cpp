// fuse_attention: softmax(scale * q k^T, causally masked) v, written out with matmul, mul, where
// and softmax, becomes one `attention` op (dsl/ops/attention.cpp), and the backward the derivative
// rules traced for it one `attention_backward`, as PyTorch Inductor's attention patterns replace
// the same chain with its fused SDPA kernel. The fused ops never store the [.., T, T] scores or
// probabilities: each (batch, head) runs in cache-sized query blocks that stop at the diagonal.
//
// The forward it matches (nn::CausalSelfAttention's):
//   s = matmul(q, kt)                  kt = transpose(k, -2, -1), or any [.., D, Tk] value
//   s = mul(s, c) | div(s, c)          optional; c a 0-d constant
//   s = where(mask, s, -inf)           optional; mask = ge(unsqueeze(arange(Tq), 1), unsqueeze(arange(Tk), 0))
//   p = softmax(s, dim=-1)
//   o = matmul(p, v)
// and the backward the rules of matmul, softmax, where and mul trace for it:
//   dp = matmul(do, transpose(v)); dv = matmul(transpose(p), do)
//   g  = mul(p, sub(dp, sum(mul(dp, p), [-1], keepdim)))      softmax's rule
//   g  = where(mask, g, 0); g = mul(g, c) | div(g, c)          the where and scale rules, if present
//   dq = matmul(g, transpose(kt)); dkt = matmul(transpose(q), g)   (replaced by dq, contiguous(dk^T))
// Every intermediate must be read only inside the pattern (p, for one, by nothing but o's matmul
// and the backward), else the chain is left as it is. Only where the op has a kernel
// (fused_attention_supported: CPU f32 and f64, CUDA bf16 and f16 through cuDNN); CUDA f32 keeps
// the chain.
#include <algorithm>
#include <cmath>
#include <optional>

#include "dsl/functions.h"
#include "graph/passes.h"

namespace kiln {

namespace {

struct Readers {
  std::vector<std::vector<int>> of;  // value -> reading nodes (a node once per input slot)
  std::vector<bool> returned;

  explicit Readers(const Graph& g) : of(readers_of(g)), returned(g.values.size(), false) {
    for (int v : g.outputs) returned[size_t(v)] = true;
  }
  // v is read exactly by `nodes` (as a multiset) and not returned.
  bool only(int v, std::vector<int> nodes) const {
    std::vector<int> r = of[size_t(v)];
    std::sort(r.begin(), r.end());
    std::sort(nodes.begin(), nodes.end());
    return !returned[size_t(v)] && r == nodes;
  }
};

const GraphNode* maker(const Graph& g, int v) {
  int p = g.values[size_t(v)].producer;
  return p < 0 ? nullptr : &g.nodes[size_t(p)];
}
int index_of(const Graph& g, const GraphNode* n) { return int(n - g.nodes.data()); }

bool is(const GraphNode* n, const char* op) { return n && n->op->name == op; }

// The value of a 0-d `full`.
std::optional<double> constant(const Graph& g, int v) {
  const GraphNode* n = maker(g, v);
  if (!is(n, "full") || !g.values[size_t(v)].meta.shape.empty()) return std::nullopt;
  return n->attrs.get<double>("value");
}

int64_t wrapped(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

// A transpose of the last two dims of a rank-4 value.
bool swaps_last_two(const Graph& g, const GraphNode* n) {
  if (!is(n, "transpose") || g.values[size_t(n->inputs[0])].meta.shape.size() != 4) return false;
  int64_t a = wrapped(n->attrs.get<int64_t>("dim0"), 4), b = wrapped(n->attrs.get<int64_t>("dim1"), 4);
  return std::min(a, b) == 2 && std::max(a, b) == 3;
}

// arange(0, n, 1) unsqueezed at `dim` (of the 2-D result).
bool is_positions(const Graph& g, int v, int64_t n, int64_t dim) {
  const GraphNode* u = maker(g, v);
  if (!is(u, "unsqueeze") || wrapped(u->attrs.get<int64_t>("dim"), 2) != dim) return false;
  const GraphNode* r = maker(g, u->inputs[0]);
  return is(r, "arange") && r->attrs.get<double>("start") == 0 && r->attrs.get<double>("step") == 1 &&
         r->attrs.get<double>("end") == double(n);
}

// mask[i, j] = i >= j over [Tq, Tk]: query i sees keys j <= i.
bool is_causal_mask(const Graph& g, int v, int64_t q_len, int64_t kv_len) {
  const GraphNode* n = maker(g, v);
  return is(n, "ge") && g.values[size_t(v)].meta.shape == Shape{q_len, kv_len} &&
         is_positions(g, n->inputs[0], q_len, 1) && is_positions(g, n->inputs[1], kv_len, 0);
}

// x scaled by a 0-d constant: mul(x, c), mul(c, x) or div(x, c). Returns x and the factor.
std::optional<std::pair<int, double>> scaled(const Graph& g, const GraphNode* n) {
  if (is(n, "mul"))
    for (int side : {0, 1})
      if (auto c = constant(g, n->inputs[size_t(side)])) return std::make_pair(n->inputs[size_t(1 - side)], *c);
  if (is(n, "div"))
    if (auto c = constant(g, n->inputs[1]); c && *c != 0) return std::make_pair(n->inputs[0], 1 / *c);
  return std::nullopt;
}

struct Match {
  // forward
  int q = -1, kt = -1, k = -1, v = -1, out = -1;  // k: kt's input when kt is a transpose, else -1
  double scale = 1;
  bool causal = false;
  std::vector<int> forward_nodes;  // replaced by the attention node, emitted at o's matmul
  int out_node = -1;
  // backward (absent when p has no reader but o's matmul)
  bool backward = false;
  int grad_out = -1, dq = -1, dkt = -1, dv = -1;
  std::vector<int> backward_nodes;
};

// The backward of the matched forward `m`, from p's readers besides o's matmul.
bool match_backward(const Graph& g, const Readers& rd, int p, Match& m, int mask, int scale_node, int where_node) {
  const std::vector<int>& readers = rd.of[size_t(p)];
  int pt = -1, dv_node = -1, prod = -1, g_node = -1;
  for (int r : readers) {
    const GraphNode& n = g.nodes[size_t(r)];
    if (r == m.out_node) continue;
    if (swaps_last_two(g, &n) && pt < 0) {
      pt = r;
    } else if (is(&n, "mul") && prod < 0 && is(maker(g, n.inputs[0] == p ? n.inputs[1] : n.inputs[0]), "matmul") &&
               rd.of[size_t(n.outputs[0])].size() == 1 && is(&g.nodes[size_t(rd.of[size_t(n.outputs[0])][0])], "sum")) {
      prod = r;
    } else if (is(&n, "mul") && g_node < 0) {
      g_node = r;
    } else {
      return false;
    }
  }
  if (pt < 0 || prod < 0 || g_node < 0 || readers.size() != 4) return false;
  // dv = matmul(p^T, do)
  int pt_v = g.nodes[size_t(pt)].outputs[0];
  if (rd.of[size_t(pt_v)].size() != 1) return false;
  dv_node = rd.of[size_t(pt_v)][0];
  const GraphNode& dvn = g.nodes[size_t(dv_node)];
  if (!is(&dvn, "matmul") || dvn.inputs[0] != pt_v || !rd.only(pt_v, {dv_node})) return false;
  int grad_out = dvn.inputs[1];
  // dp = matmul(do, v^T), read by the product with p and by the sub
  const GraphNode& pn = g.nodes[size_t(prod)];
  int dp = pn.inputs[0] == p ? pn.inputs[1] : pn.inputs[0];
  const GraphNode* dpn = maker(g, dp);
  if (!is(dpn, "matmul") || dpn->inputs[0] != grad_out || !swaps_last_two(g, maker(g, dpn->inputs[1])) ||
      maker(g, dpn->inputs[1])->inputs[0] != m.v)
    return false;
  int prod_v = pn.outputs[0];
  int sum_node = rd.of[size_t(prod_v)][0];
  const GraphNode& sn = g.nodes[size_t(sum_node)];
  const auto& dims = sn.attrs.get<std::vector<int64_t>>("dims");
  if (dims.size() != 1 || wrapped(dims[0], 4) != 3 || !sn.attrs.get<bool>("keepdim") || !rd.only(prod_v, {sum_node}))
    return false;
  int row_sums = sn.outputs[0];
  if (rd.of[size_t(row_sums)].size() != 1) return false;
  int sub_node = rd.of[size_t(row_sums)][0];
  const GraphNode& un = g.nodes[size_t(sub_node)];
  if (!is(&un, "sub") || un.inputs[0] != dp || un.inputs[1] != row_sums || !rd.only(row_sums, {sub_node}) ||
      !rd.only(dp, {prod, sub_node}))
    return false;
  const GraphNode& gn = g.nodes[size_t(g_node)];
  int centered = un.outputs[0];
  if (!((gn.inputs[0] == p && gn.inputs[1] == centered) || (gn.inputs[1] == p && gn.inputs[0] == centered)) ||
      !rd.only(centered, {g_node}))
    return false;
  // the where and scale rules, in the order the tape ran them (the forward's reverse)
  int grad = gn.outputs[0];
  std::vector<int> nodes = {pt, dv_node, index_of(g, dpn), prod, sum_node, sub_node, g_node};
  if (where_node >= 0) {
    if (rd.of[size_t(grad)].size() != 1) return false;
    int w = rd.of[size_t(grad)][0];
    const GraphNode& wn = g.nodes[size_t(w)];
    if (!is(&wn, "where") || wn.inputs[0] != mask || wn.inputs[1] != grad || constant(g, wn.inputs[2]) != 0.0 ||
        !rd.only(grad, {w}))
      return false;
    nodes.push_back(w);
    grad = wn.outputs[0];
  }
  if (scale_node >= 0) {
    if (rd.of[size_t(grad)].size() != 1) return false;
    int s = rd.of[size_t(grad)][0];
    auto sc = scaled(g, &g.nodes[size_t(s)]);
    if (!sc || sc->first != grad || sc->second != m.scale || !rd.only(grad, {s})) return false;
    nodes.push_back(s);
    grad = g.nodes[size_t(s)].outputs[0];
  }
  // dq = matmul(g, kt^T), dkt = matmul(q^T, g)
  int dq_node = -1, dkt_node = -1;
  for (int r : rd.of[size_t(grad)]) {
    const GraphNode& n = g.nodes[size_t(r)];
    if (!is(&n, "matmul")) return false;
    const GraphNode* other = maker(g, n.inputs[0] == grad ? n.inputs[1] : n.inputs[0]);
    if (n.inputs[0] == grad && swaps_last_two(g, other) && other->inputs[0] == m.kt && dq_node < 0)
      dq_node = r;
    else if (n.inputs[1] == grad && swaps_last_two(g, other) && other->inputs[0] == m.q && dkt_node < 0)
      dkt_node = r;
    else
      return false;
  }
  if (dq_node < 0 || dkt_node < 0 || rd.returned[size_t(grad)]) return false;
  for (int r : {dq_node, dkt_node}) {
    const GraphNode& n = g.nodes[size_t(r)];
    int t = n.inputs[0] == grad ? n.inputs[1] : n.inputs[0];
    if (rd.only(t, {r})) nodes.push_back(index_of(g, maker(g, t)));  // the pattern's own transposed view
    nodes.push_back(r);
  }
  m.backward = true;
  m.grad_out = grad_out;
  m.dq = g.nodes[size_t(dq_node)].outputs[0];
  m.dkt = g.nodes[size_t(dkt_node)].outputs[0];
  m.dv = dvn.outputs[0];
  m.backward_nodes = std::move(nodes);
  return true;
}

// The pattern around softmax node `sm`, or nothing.
std::optional<Match> match(const Graph& g, const Readers& rd, int sm) {
  const GraphNode& smn = g.nodes[size_t(sm)];
  const Value& pv = g.values[size_t(smn.outputs[0])];
  if (pv.meta.shape.size() != 4 || wrapped(smn.attrs.get<int64_t>("dim"), 4) != 3) return std::nullopt;
  // f32 on CUDA stays the chain: its compiled form (cuBLAS GEMMs around one fused softmax
  // pipeline) measures as fast as the f32 op there, and fusion may join the softmax to its neighbours.
  if (pv.meta.device.is_cuda() && pv.meta.dtype == DType::f32) return std::nullopt;
  Match m;
  int p = smn.outputs[0], s = smn.inputs[0];
  m.forward_nodes.push_back(sm);
  int mask = -1, where_node = -1, scale_node = -1;
  if (const GraphNode* w = maker(g, s); is(w, "where")) {
    auto fill = constant(g, w->inputs[2]);
    if (!fill || !std::isinf(*fill) || *fill > 0 || !rd.only(s, {sm})) return std::nullopt;
    mask = w->inputs[0];
    where_node = index_of(g, w);
    m.causal = true;
    m.forward_nodes.push_back(where_node);
    s = w->inputs[1];
  }
  if (auto sc = scaled(g, maker(g, s))) {
    if (!rd.only(s, {m.forward_nodes.back()})) return std::nullopt;
    scale_node = index_of(g, maker(g, s));
    m.scale = sc->second;
    m.forward_nodes.push_back(scale_node);
    s = sc->first;
  }
  const GraphNode* qk = maker(g, s);
  if (!is(qk, "matmul") || !rd.only(s, {m.forward_nodes.back()})) return std::nullopt;
  m.q = qk->inputs[0], m.kt = qk->inputs[1];
  m.forward_nodes.push_back(index_of(g, qk));
  const Shape& qs = g.values[size_t(m.q)].meta.shape;
  const Shape& kts = g.values[size_t(m.kt)].meta.shape;
  // Same batch and head dims (no broadcasting), and at least one key (the op's shape rule).
  if (qs.size() != 4 || kts.size() != 4 || qs[0] != kts[0] || qs[1] != kts[1] || kts[3] == 0) return std::nullopt;
  if (m.causal && !is_causal_mask(g, mask, qs[2], kts[3])) return std::nullopt;
  if (const GraphNode* t = maker(g, m.kt); swaps_last_two(g, t)) m.k = t->inputs[0];
  // o = matmul(p, v)
  for (int r : rd.of[size_t(p)]) {
    const GraphNode& n = g.nodes[size_t(r)];
    if (is(&n, "matmul") && n.inputs[0] == p && m.out_node < 0) m.out_node = r;
  }
  if (m.out_node < 0) return std::nullopt;
  const GraphNode& on = g.nodes[size_t(m.out_node)];
  m.v = on.inputs[1], m.out = on.outputs[0];
  const Shape& vs = g.values[size_t(m.v)].meta.shape;
  if (vs.size() != 4 || vs[0] != qs[0] || vs[1] != qs[1]) return std::nullopt;
  if (!fused_attention_supported(pv.meta.dtype, pv.meta.device, qs[3], vs[3])) return std::nullopt;
  m.forward_nodes.push_back(m.out_node);
  if (rd.returned[size_t(p)]) return std::nullopt;
  if (rd.of[size_t(p)].size() > 1 && !match_backward(g, rd, p, m, mask, scale_node, where_node)) return std::nullopt;
  return m;
}

std::string ids(const Graph& g, const std::vector<int>& nodes) {
  std::string out;
  for (int n : nodes) out += (out.empty() ? "%" : " %") + std::to_string(g.nodes[size_t(n)].outputs[0]);
  return out;
}

}  // namespace

int fuse_attention(Graph& g, std::vector<std::string>* notes) {
  Readers rd(g);
  std::vector<Match> matches;
  std::vector<int> role(g.nodes.size(), -1);  // node -> index of the match that replaces it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!is(&g.nodes[i], "softmax")) continue;
    std::optional<Match> m = match(g, rd, int(i));
    if (!m) continue;
    bool free = true;
    for (const auto* list : {&m->forward_nodes, &m->backward_nodes})
      for (int n : *list) free = free && role[size_t(n)] < 0;
    if (!free) continue;
    for (const auto* list : {&m->forward_nodes, &m->backward_nodes})
      for (int n : *list) role[size_t(n)] = int(matches.size());
    matches.push_back(*m);
  }
  if (matches.empty()) return 0;
  static const OpDef& attention = op_def("attention");
  static const OpDef& attention_backward = op_def("attention_backward");
  static const OpDef& transpose = op_def("transpose");
  static const OpDef& contiguous = op_def("contiguous");
  const Attrs swap{{"dim0", int64_t(-2)}, {"dim1", int64_t(-1)}};
  GraphRewrite r(g);
  std::vector<int> lse(matches.size(), -1), k(matches.size(), -1);
  std::vector<bool> backward_done(matches.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    int mi = role[i];
    if (mi < 0) {
      r.copy(n);
      continue;
    }
    const Match& m = matches[size_t(mi)];
    Attrs a{{"scale", m.scale}, {"causal", m.causal}};
    const size_t first_new = r.out.nodes.size();
    if (int(i) == m.out_node) {
      k[size_t(mi)] = m.k >= 0 ? r.id(m.k) : r.out.add_inferred_node(transpose, swap, {r.id(m.kt)})[0];
      std::vector<int> outs = r.out.add_inferred_node(attention, a, {r.id(m.q), k[size_t(mi)], r.id(m.v)});
      r.set(m.out, outs[0]);
      lse[size_t(mi)] = outs[1];
    } else if (m.backward && !backward_done[size_t(mi)] && lse[size_t(mi)] >= 0 && r.id(m.grad_out) >= 0) {
      // The first backward node whose inputs all exist: the three gradients come out here.
      std::vector<int> grads = r.out.add_inferred_node(
          attention_backward, a, {r.id(m.q), k[size_t(mi)], r.id(m.v), r.id(m.out), r.id(m.grad_out), lse[size_t(mi)]});
      // matmul made dkt contiguous, and the views after it were traced with that layout.
      int dkt = r.out.add_inferred_node(contiguous, {}, {r.out.add_inferred_node(transpose, swap, {grads[1]})[0]})[0];
      r.set(m.dq, grads[0]);
      r.set(m.dkt, dkt);
      r.set(m.dv, grads[2]);
      backward_done[size_t(mi)] = true;
    }
    for (size_t j = first_new; j < r.out.nodes.size(); ++j) r.out.nodes[j].grad_enabled = n.grad_enabled;
  }
  for (size_t mi = 0; mi < matches.size(); ++mi) {
    const Match& m = matches[mi];
    if (notes)
      notes->push_back("softmax %" + std::to_string(g.nodes[size_t(m.forward_nodes[0])].outputs[0]) + " of " +
                       (m.causal ? "causally masked " : "") + "scores (scale " + std::to_string(m.scale) +
                       "): nodes " + ids(g, m.forward_nodes) + " -> one attention" +
                       (m.backward ? "; their backward " + ids(g, m.backward_nodes) + " -> one attention_backward" : ""));
  }
  g = std::move(r).finish();
  return int(matches.size());
}

}  // namespace kiln
