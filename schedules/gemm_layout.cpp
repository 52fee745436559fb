#include "schedules/gemm_layout.h"

#include <map>

#include "dsl/op_def.h"
#include "graph/passes.h"
#include "schedules/lower_region.h"
#include "schedules/weight_packing.h"

namespace kiln {

namespace {

// Smaller operands stay as they are: short strides cost little, and a copy has a fixed cost.
constexpr int64_t kDenseGemmMinRows = 256;

// Whether operand `k` (0: a, 1: b) of matmul node n is a 2-D view read across its layout: a
// with its rows strided (the kernel walks a along k), b with its columns strided (the kernel packs
// b's panels along n). A weight the backend packs once per version (weight_packing.h) is left to
// that.
bool wants_dense(const Graph& g, const GraphNode& n, int k) {
  if (!n.op->gemm || gemm_lowerable(g, n)) return false;
  const Value& a = g.values[size_t(n.inputs[0])];
  const Value& b = g.values[size_t(n.inputs[1])];
  const Value& v = k == 0 ? a : b;
  if (!v.meta.device.is_cpu() || v.meta.shape.size() != 2 || b.meta.shape.size() != 2) return false;
  if (k == 1 && packs_weight(g, n)) return false;
  if (v.meta.dtype != DType::f32 && v.meta.dtype != DType::f64) return false;
  if (v.strides.back() == 1 || v.meta.shape[0] < kDenseGemmMinRows || v.meta.shape[1] < kDenseGemmMinRows) return false;
  return !view_chain(g, n.inputs[size_t(k)]).empty();
}

}  // namespace

int dense_gemm_operands(Graph& g) {
  // The operands to copy, {matmul node, operand}, by the node after which the copy is made (-1:
  // first, for graph inputs).
  using Operand = std::pair<int, int>;
  std::map<int, std::vector<Operand>> copies_after;
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int k = 0; k < 2; ++k) {
      if (!wants_dense(g, g.nodes[i], k)) continue;
      std::vector<int> chain = view_chain(g, g.nodes[i].inputs[size_t(k)]);
      int base = g.nodes[size_t(chain.front())].inputs[0];
      copies_after[g.values[size_t(base)].producer].push_back({int(i), k});
      ++count;
    }
  }
  if (count == 0) return 0;
  static const OpDef& contiguous = op_def("contiguous");
  static const OpDef& permute = op_def("permute");
  static const OpDef& flatten = op_def("flatten");
  GraphRewrite r(g);
  std::map<Operand, int> dense;  // {matmul node, operand} -> the operand's dense copy (new id)
  auto make_copies = [&](int after) {
    auto it = copies_after.find(after);
    if (it == copies_after.end()) return;
    for (const auto& [m, k] : it->second) {
      size_t first = r.out.nodes.size();
      int operand = g.nodes[size_t(m)].inputs[size_t(k)];
      std::vector<int> chain = view_chain(g, operand);
      int base = g.nodes[size_t(chain.front())].inputs[0];
      if (transposes_flattened(g, base, operand)) {
        // base [d0, ..., dn] read as [dn, d0*...*dn-1]: the copy is base's last dim moved to the
        // front, then flattened (a view of the dense copy). Unflattened, the copy's pipeline reads
        // base without dividing indices, in tiles of its last dim and its new innermost one.
        int rank = int(g.values[size_t(base)].meta.shape.size());
        std::vector<int64_t> perm{rank - 1};
        for (int d = 0; d + 1 < rank; ++d) perm.push_back(d);
        int moved = r.out.add_inferred_node(permute, {{"dims", perm}}, {r.id(base)})[0];
        int copy = r.out.add_inferred_node(contiguous, {}, {moved})[0];
        dense[{m, k}] = rank == 2 ? copy
                                  : r.out.add_inferred_node(flatten, {{"start_dim", int64_t(1)}, {"end_dim", int64_t(-1)}},
                                                            {copy})[0];
      } else {
        int v = -1;
        for (int view : chain) {
          const GraphNode& n = g.nodes[size_t(view)];
          v = r.out.add_inferred_node(*n.op, n.attrs, {v < 0 ? r.id(n.inputs[0]) : v})[0];
        }
        dense[{m, k}] = r.out.add_inferred_node(contiguous, {}, {v})[0];
      }
      for (size_t j = first; j < r.out.nodes.size(); ++j) r.out.nodes[j].grad_enabled = g.nodes[size_t(m)].grad_enabled;
    }
  };
  make_copies(-1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    auto operand = [&](int k) {
      auto d = dense.find({int(i), k});
      return d == dense.end() ? r.id(n.inputs[size_t(k)]) : d->second;
    };
    if (!dense.count({int(i), 0}) && !dense.count({int(i), 1})) {
      r.copy(n);
    } else {
      r.set(n.outputs[0], r.out.add_inferred_node(*n.op, n.attrs, {operand(0), operand(1)})[0]);
    }
    make_copies(int(i));
  }
  g = std::move(r).finish();
  eliminate_dead_code(g);
  return count;
}

}  // namespace kiln
