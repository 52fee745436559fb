#include "schedules/view_index.h"

#include <algorithm>
#include <array>
#include <string>

#include "dsl/shape.h"

namespace kiln {

using namespace Halide;

namespace {

// A reshape's dims matched in blocks of equal size products, {input begin, end, output begin,
// end} (flatten(0, 1) of [4, 256, 2048]: [4, 256] <-> [1024] and [2048] <-> [2048]), so each
// index is unravelled within its block only: a dim that passes through is read as it is, and
// the innermost index stays the innermost var (dense vector loads). The traced sizes pick the
// blocks and the symbolic sizes must agree; false when they do not split so (one block then).
bool view_blocks(const Graph& g, int in, int v, std::vector<std::array<int, 4>>& blocks) {
  const Shape &is = g.values[size_t(in)].meta.shape, &os = g.values[size_t(v)].meta.shape;
  int r = int(is.size()), R = int(os.size()), a = 0, b = 0;
  if (numel(is) == 0) return false;
  auto product = [&g](const SymShape& s, int begin, int end) {
    SymDim p = SymDim::constant(1);
    for (int d = begin; d < end; ++d) {
      SymDim c = g.shape_env->canonical(s[size_t(d)]);
      if (c.opaque) p.opaque = true;
      p.coeff *= c.coeff;
      p.syms.insert(p.syms.end(), c.syms.begin(), c.syms.end());
    }
    std::sort(p.syms.begin(), p.syms.end());
    return p;
  };
  while (a < r && b < R) {
    int a0 = a, b0 = b;
    int64_t pi = is[size_t(a++)], po = os[size_t(b++)];
    while (pi != po) {
      if (pi < po && a < r) pi *= is[size_t(a++)];
      else if (po < pi && b < R) po *= os[size_t(b++)];
      else return false;
    }
    SymDim si = product(g.values[size_t(in)].sym, a0, a), so = product(g.values[size_t(v)].sym, b0, b);
    if (si.opaque || !(si == so)) return false;
    blocks.push_back({a0, a, b0, b});
  }
  for (; a < r; ++a)
    if (is[size_t(a)] != 1) return false;
  for (; b < R; ++b)
    if (os[size_t(b)] != 1) return false;
  return true;
}

}  // namespace

bool dim_is_one(const Graph& g, int v, size_t d) { return g.values[size_t(v)].sym[d] == SymDim::constant(1); }

std::vector<Expr> view_source_index(const Graph& g, const GraphNode& n, const std::vector<Expr>& args,
                                    const std::vector<Expr>& in_shape, const std::vector<Expr>& out_shape) {
  int in = n.inputs[0], v = n.outputs[0];
  const Value& iv = g.values[in];
  const Value& ov = g.values[v];
  int r = int(iv.meta.shape.size()), R = int(ov.meta.shape.size());
  std::vector<Expr> o(R);  // output index of kiln dim d
  for (int d = 0; d < R; ++d) o[d] = args[R - 1 - d];
  std::vector<Expr> i(r);  // input index of kiln dim d
  const std::string& op = n.op->name;
  const Attrs& a = n.attrs;
  if (op == "detach") {
    i = o;
  } else if (op == "transpose" || op == "permute") {
    std::vector<int> perm(r);
    for (int d = 0; d < r; ++d) perm[d] = d;
    if (op == "transpose" && r > 0)
      std::swap(perm[wrap_dim("transpose", a.get<int64_t>("dim0"), r)], perm[wrap_dim("transpose", a.get<int64_t>("dim1"), r)]);
    if (op == "permute")
      for (int d = 0; d < r; ++d) perm[d] = wrap_dim("permute", a.get<std::vector<int64_t>>("dims")[d], r);
    for (int d = 0; d < R; ++d) i[perm[d]] = o[d];
  } else if (op == "unsqueeze") {
    int64_t dim = a.get<int64_t>("dim");
    int u = int(dim < 0 ? dim + r + 1 : dim);
    for (int d = 0, k = 0; d < R; ++d)
      if (d != u) i[k++] = o[d];
  } else if (op == "squeeze") {
    int only = a.has("dim") ? wrap_dim("squeeze", a.get<int64_t>("dim"), r) : -1;
    for (int d = 0, k = 0; d < r; ++d) {
      bool dropped = iv.meta.shape[d] == 1 && (only < 0 || only == d);
      i[d] = dropped ? Expr(0) : o[k++];
    }
  } else if (op == "expand") {
    int off = R - r;
    for (int d = 0; d < r; ++d) i[d] = dim_is_one(g, in, size_t(d)) && !dim_is_one(g, v, size_t(d + off)) ? Expr(0) : o[d + off];
  } else if (op == "slice") {
    int d = wrap_dim("slice", a.get<int64_t>("dim"), r);
    Expr n_ = in_shape[d];
    Expr start = Expr(int32_t(a.get<int64_t>("start")));
    start = clamp(select(start < 0, start + n_, start), 0, n_);
    for (int k = 0; k < r; ++k) i[k] = o[k];
    i[d] = start + o[d] * int32_t(a.get<int64_t>("step"));
  } else {  // view, flatten, unflatten: the same elements in row-major order
    std::vector<std::array<int, 4>> blocks;
    if (!view_blocks(g, in, v, blocks)) blocks = {{0, r, 0, R}};
    for (int d = 0; d < r; ++d) i[d] = Expr(0);  // size-1 dims outside every block
    for (const auto& [a0, a1, b0, b1] : blocks) {
      // Dims of size 1 for every call take no part: a block of one such dim each side (a
      // [1, 1, 768] sum kept as [768]) maps the index as it is, no division or modulo, so that
      // bounds inference of one output point gives one input point.
      std::vector<int> ins, outs;
      for (int d = a0; d < a1; ++d)
        if (!dim_is_one(g, in, size_t(d))) ins.push_back(d);
      for (int d = b0; d < b1; ++d)
        if (!dim_is_one(g, v, size_t(d))) outs.push_back(d);
      if (ins.size() <= 1 && outs.size() <= 1) {
        if (!ins.empty()) i[ins[0]] = outs.empty() ? Expr(0) : o[outs[0]];
        continue;
      }
      Expr linear = o[b0];
      for (int d = b0 + 1; d < b1; ++d) linear = linear * out_shape[d] + o[d];
      for (int d = a1 - 1; d >= a0; --d) {
        i[d] = d == a0 ? linear : linear % in_shape[d];
        if (d > a0) linear = linear / in_shape[d];
      }
    }
  }
  std::vector<Expr> where(r);
  for (int d = 0; d < r; ++d) where[r - 1 - d] = i[d];
  return where;
}

}  // namespace kiln
