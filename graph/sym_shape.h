// Symbolic shapes. A dynamic dim of a traced input is a symbol (s0, s1, ...) with the value the
// trace saw as its hint. Other dims are products of symbols times a constant ("4*s0"), found by
// running the ops' own shape rules with probe values in place of the symbols (see ShapeEnv::infer):
// no op needs a second, symbolic, shape rule.
//
// The ShapeEnv records what the trace learned about its symbols: two symbols an op needs equal are
// unified ("arg 0 dim 0 == arg 1 dim 0"); a symbol whose value the host read, or that an op's rule
// needs at a particular value, is specialized to its hint. Both become guards.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/op_def.h"

namespace kiln {

struct SymDim {
  int64_t coeff = 1;      // the constant factor (the whole value when syms is empty)
  std::vector<int> syms;  // symbol ids, sorted, repeated for powers
  bool opaque = false;    // not a product: some other function of `syms` (e.g. a sum, from cat)

  static SymDim constant(int64_t v) { return {v, {}, false}; }
  static SymDim symbol(int s) { return {1, {s}, false}; }
  bool is_static() const { return syms.empty() && !opaque; }
  bool operator==(const SymDim&) const = default;
  std::string str() const;  // "128", "s0", "4*s0*s1", "?(s0,s1)"
};
using SymShape = std::vector<SymDim>;

SymShape static_shape(const Shape& s);
std::string to_string(const SymShape& s);  // "[s0, 256]"

struct Symbol {
  int64_t hint = 0;
  std::string source;        // "arg 0 dim 1"
  int parent = -1;           // union-find: -1 for a root
  bool specialized = false;  // guarded to equal `hint`
  std::string why;           // why it was unified or specialized (a log line)
};

class ShapeEnv {
 public:
  ShapeEnv() = default;
  explicit ShapeEnv(std::vector<Symbol> symbols) : symbols_(std::move(symbols)) {}  // as symbols() gave them

  int new_symbol(int64_t hint, std::string source);
  int root(int s) const;
  const Symbol& symbol(int s) const { return symbols_[s]; }
  int symbol_count() const { return int(symbols_.size()); }
  const std::vector<Symbol>& symbols() const { return symbols_; }

  // Canonical form: symbols replaced by their roots, specialized ones folded into the constant.
  SymDim canonical(const SymDim& d) const;
  SymShape canonical(const SymShape& s) const;
  int64_t hint(const SymDim& d) const;
  // The dim with each live symbol replaced by its probe value (opaque dims: their hint).
  int64_t probe(const SymDim& d, int64_t hint_value, int set = 0) const;

  // Guards on the value of every symbol in `d` (host code read it; `why` says where).
  void specialize(const SymDim& d, const std::string& why);
  void unify(int a, int b, const std::string& why);

  // Output shapes of `op` applied to inputs with these metas (hint sizes) and symbolic shapes:
  // the op's rule at the hints gives the metas, and its rule at probe values gives the symbolic
  // shapes. A rule that rejects the probes needs some symbols equal (they are unified) or fixed
  // (they are specialized); either way the result stays exact for every size the guards admit.
  std::vector<TensorMeta> infer(const OpDef& op, const std::vector<TensorMeta>& metas,
                                const std::vector<SymShape>& syms, const Attrs& attrs,
                                std::vector<SymShape>& out_syms);

  // Called on every unification or specialization (the tracer logs it as a guard).
  std::function<void(const std::string&)> on_guard;

 private:
  std::vector<Symbol> symbols_;
};

}  // namespace kiln
