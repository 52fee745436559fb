#include "schedules/size_specialization.h"

#include "dsl/error.h"

namespace kiln {

namespace {

// The root symbol of the argument's dim, or -1 when that size is static.
int symbol_of(const Graph& g, const SizeCondition& c) {
  for (const GraphInput& in : g.inputs) {
    if (in.kind != InputKind::argument || in.index != c.argument) continue;
    const SymShape& sym = g.values[size_t(in.value)].sym;
    if (c.dim < 0 || size_t(c.dim) >= sym.size()) return -1;
    SymDim d = g.shape_env->canonical(sym[size_t(c.dim)]);
    return d.syms.size() == 1 && d.coeff == 1 && !d.opaque ? d.syms[0] : -1;
  }
  return -1;
}

}  // namespace

std::vector<std::string> specialize_sizes(const Graph& g, LoweredRegion& lowered,
                                          const std::vector<SizeCondition>& conditions) {
  std::vector<std::string> applied;
  for (const SizeCondition& c : conditions) {
    int sym = symbol_of(g, c);
    auto it = lowered.symbols.find(sym);
    if (sym < 0 || it == lowered.symbols.end()) continue;
    Halide::Expr size = it->second;
    Halide::Expr holds = c.modulus > 0 ? size % int(c.modulus) == int(c.value) : size == int(c.value);
    for (Halide::Func& f : lowered.outputs) f.specialize(holds);
    applied.push_back(c.text + " (s" + std::to_string(sym) + ")");
  }
  return applied;
}

}  // namespace kiln
