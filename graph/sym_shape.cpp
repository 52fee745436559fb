#include "graph/sym_shape.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "dsl/error.h"

namespace kiln {

namespace {

// Probe values stand in for symbols when an op's shape rule runs symbolically: distinct primes,
// large enough that no rule mistakes them for a constant of the graph, small enough that products
// of a few of them stay far from int64 overflow.
// Three sets. The formula is found with the first; a dim whose formula does not predict the
// second (large) or the third (small sizes: a slice end that clamps only below it) is not a
// product of symbols.
int64_t probe_of(int root, int set = 0) {
  static const int64_t primes[3][16] = {
      {10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079, 10091, 10093, 10099, 10103, 10111, 10133, 10139, 10141},
      {20011, 20021, 20023, 20029, 20047, 20051, 20063, 20071, 20089, 20101, 20107, 20113, 20117, 20123, 20129, 20143},
      {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53}};
  if (root < 16) return primes[set][root];
  return (set == 0 ? 10151 : set == 1 ? 20201 : 59) + 2 * int64_t(root);  // odd, distinct past 16
}

}  // namespace

std::string SymDim::str() const {
  std::ostringstream os;
  if (opaque) {
    os << "?(";
    for (size_t i = 0; i < syms.size(); ++i) os << (i ? "," : "") << 's' << syms[i];
    os << ')';
    return os.str();
  }
  if (syms.empty()) return std::to_string(coeff);
  if (coeff != 1) os << coeff << '*';
  for (size_t i = 0; i < syms.size(); ++i) os << (i ? "*" : "") << 's' << syms[i];
  return os.str();
}

SymShape static_shape(const Shape& s) {
  SymShape out;
  out.reserve(s.size());
  for (int64_t d : s) out.push_back(SymDim::constant(d));
  return out;
}

std::string to_string(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

int ShapeEnv::new_symbol(int64_t hint, std::string source) {
  symbols_.push_back({hint, std::move(source), -1, false, ""});
  return int(symbols_.size()) - 1;
}

int ShapeEnv::root(int s) const {
  while (symbols_[s].parent >= 0) s = symbols_[s].parent;
  return s;
}

SymDim ShapeEnv::canonical(const SymDim& d) const {
  SymDim out{d.coeff, {}, d.opaque};
  for (int s : d.syms) {
    int r = root(s);
    if (symbols_[r].specialized && !d.opaque) out.coeff *= symbols_[r].hint;
    else if (!symbols_[r].specialized) out.syms.push_back(r);
  }
  std::sort(out.syms.begin(), out.syms.end());
  if (out.opaque) {
    out.syms.erase(std::unique(out.syms.begin(), out.syms.end()), out.syms.end());
    if (out.syms.empty()) return SymDim::constant(d.coeff);  // every dependency is fixed now
  }
  return out;
}

SymShape ShapeEnv::canonical(const SymShape& s) const {
  SymShape out;
  out.reserve(s.size());
  for (const SymDim& d : s) out.push_back(canonical(d));
  return out;
}

int64_t ShapeEnv::hint(const SymDim& d) const {
  KILN_CHECK(!d.opaque, "shape env: an opaque dim has no formula to evaluate");
  int64_t v = d.coeff;
  for (int s : d.syms) v *= symbols_[root(s)].hint;
  return v;
}

int64_t ShapeEnv::probe(const SymDim& raw, int64_t hint_value, int set) const {
  SymDim c = canonical(raw);
  if (c.opaque) return hint_value;
  int64_t v = c.coeff;
  for (int s : c.syms) v *= probe_of(s, set);
  return v;
}

void ShapeEnv::specialize(const SymDim& d, const std::string& why) {
  for (int s : d.syms) {
    int r = root(s);
    if (symbols_[r].specialized) continue;
    symbols_[r].specialized = true;
    symbols_[r].why = why;
    if (on_guard) on_guard(symbols_[r].source + " == " + std::to_string(symbols_[r].hint) + ": " + why);
  }
}

void ShapeEnv::unify(int a, int b, const std::string& why) {
  int ra = root(a), rb = root(b);
  if (ra == rb) return;
  if (ra > rb) std::swap(ra, rb);
  symbols_[rb].parent = ra;
  symbols_[rb].why = why;
  if (symbols_[rb].specialized) symbols_[ra].specialized = true;
  if (on_guard) on_guard(symbols_[rb].source + " == " + symbols_[ra].source + ": " + why);
}

std::vector<TensorMeta> ShapeEnv::infer(const OpDef& op, const std::vector<TensorMeta>& metas,
                                        const std::vector<SymShape>& syms, const Attrs& attrs,
                                        std::vector<SymShape>& out_syms) {
  std::vector<TensorMeta> out = op.infer(metas, attrs);
  out_syms.assign(out.size(), {});
  std::set<int> roots;  // the live symbols the inputs depend on
  bool opaque_input = false;
  for (const SymShape& s : syms)
    for (const SymDim& d : s) {
      SymDim c = canonical(d);
      opaque_input = opaque_input || c.opaque;
      for (int x : c.syms) roots.insert(x);
    }
  if (roots.empty()) {
    for (size_t k = 0; k < out.size(); ++k) out_syms[k] = static_shape(out[k].shape);
    return out;
  }

  // The inputs at probe set `set`; `as` makes a symbol take another's probe value (x -> y), or
  // its hint (x -> -1), to try a unification or a specialization before making it.
  auto probe_metas = [&](int set, const std::map<int, int>& as = {}) {
    std::vector<TensorMeta> p = metas;
    for (size_t i = 0; i < p.size(); ++i)
      for (size_t d = 0; d < syms[i].size(); ++d) {
        SymDim c = canonical(syms[i][d]);
        if (c.opaque) continue;  // probed at its hint
        int64_t v = c.coeff;
        for (int x : c.syms) {
          auto it = as.find(x);
          v *= it == as.end() ? probe_of(x, set) : it->second < 0 ? symbols_[x].hint : probe_of(it->second, set);
        }
        p[i].shape[d] = v;
      }
    return p;
  };
  auto accepts = [&](const std::map<int, int>& as) {
    try {
      op.infer(probe_metas(0, as), attrs);
      op.infer(probe_metas(1, as), attrs);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  // The symbols the inputs still depend on, sorted.
  auto live_roots = [&] {
    std::vector<int> live;
    for (int r : roots)
      if (!symbols_[root(r)].specialized) live.push_back(root(r));
    std::sort(live.begin(), live.end());
    live.erase(std::unique(live.begin(), live.end()), live.end());
    return live;
  };
  auto all_static = [&] {
    for (size_t k = 0; k < out.size(); ++k) out_syms[k] = static_shape(out[k].shape);
    return out;
  };
  std::vector<TensorMeta> probed, probed2;
  try {
    probed = op.infer(probe_metas(0), attrs);
  } catch (const Error&) {
    // The rule needs some sizes equal: unify symbols whose hints agree and try again. The
    // fewest pairs that satisfy the rule (one, else two: an elementwise op on two [s, s] inputs
    // needs rows equal and columns equal, not all four), else every such pair.
    std::vector<int> rs(roots.begin(), roots.end());
    std::vector<std::pair<int, int>> pairs;
    for (size_t i = 0; i < rs.size(); ++i)
      for (size_t j = i + 1; j < rs.size(); ++j)
        if (root(rs[i]) != root(rs[j]) && symbols_[rs[i]].hint == symbols_[rs[j]].hint) pairs.emplace_back(rs[i], rs[j]);
    auto merged = [](std::vector<std::pair<int, int>> ps) {  // each symbol -> the smallest it is merged with
      std::map<int, int> as;
      auto rep = [&](int x) {
        while (as.count(x)) x = as[x];
        return x;
      };
      for (auto [a, b] : ps) {
        int ra = rep(a), rb = rep(b);
        if (ra != rb) as[std::max(ra, rb)] = std::min(ra, rb);
      }
      for (auto& [x, y] : as) y = rep(y);
      return as;
    };
    std::vector<std::pair<int, int>> chosen = pairs;
    bool found = false;
    for (size_t i = 0; i < pairs.size() && !found; ++i)
      if (accepts(merged({pairs[i]}))) chosen = {pairs[i]}, found = true;
    for (size_t i = 0; i < pairs.size() && !found; ++i)
      for (size_t j = i + 1; j < pairs.size() && !found; ++j)
        if (accepts(merged({pairs[i], pairs[j]}))) chosen = {pairs[i], pairs[j]}, found = true;
    for (auto [a, b] : chosen) unify(a, b, op.name + " needs them equal");
    try {
      probed = op.infer(probe_metas(0), attrs);
    } catch (const Error&) {
      // Fix as few sizes as the rule needs: one symbol held at its hint, if that is enough
      // (matmul's K against a weight), else all of them.
      std::vector<int> live = live_roots();
      int held = -1;
      for (int r : live)
        if (accepts({{r, -1}})) {
          held = r;
          break;
        }
      for (int r : live)
        if (held < 0 || r == held) specialize(SymDim::symbol(r), op.name + "'s shape rule needs a fixed size");
      try {
        probed = op.infer(probe_metas(0), attrs);
      } catch (const Error&) {
        for (int r : rs) specialize(SymDim::symbol(r), op.name + "'s shape rule needs a fixed size");
        return all_static();
      }
    }
  }
  try {
    probed2 = op.infer(probe_metas(1), attrs);
  } catch (const Error&) {
    for (int r : roots) specialize(SymDim::symbol(r), op.name + "'s shape rule needs a fixed size");
    return all_static();
  }
  std::vector<TensorMeta> small;  // small sizes may break a rule (narrow past the end): no verdict then
  try {
    small = op.infer(probe_metas(2), attrs);
  } catch (const Error&) {
  }

  // Each output dim: factor the probe value by the symbols' probes; what remains is the constant.
  // A dim whose factoring does not reproduce the hint is some other function (a sum): opaque.
  std::vector<int> live = live_roots();
  // An opaque input (its size has no formula, so it was probed at its hint) makes every output
  // dim opaque: the probes cannot tell which of them follow it.
  for (size_t k = 0; k < out.size(); ++k) {
    for (size_t d = 0; d < out[k].shape.size(); ++d) {
      int64_t v = probed[k].shape[d];
      SymDim dim;
      for (int s : live)
        while (v != 0 && v % probe_of(s) == 0) {
          v /= probe_of(s);
          dim.syms.push_back(s);
        }
      dim.coeff = v;
      bool small_differs = !small.empty() && probe(dim, 0, 2) != small[k].shape[d];
      if (opaque_input || hint(dim) != out[k].shape[d] || probe(dim, 0, 1) != probed2[k].shape[d] || small_differs)
        dim = {out[k].shape[d], live, true};
      out_syms[k].push_back(dim);
    }
  }
  return out;
}

}  // namespace kiln
