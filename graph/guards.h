// Guards: the conditions under which a cached graph may stand in for a call of the compiled
// function. For each tensor argument: dtype, device, rank, requires_grad, each size (a value, or a
// symbol: any size >= 2, equal wherever the symbol repeats) and the layout (contiguous, a
// permutation of contiguous, or exact strides); the grad mode; the value of each static argument;
// the autocast state; whether each captured tensor requires grad, and how a backward traced over it
// treats its grad-ready hooks (traced, eager, none: DistributedDataParallel's no_sync() changes it). check() names the first guard that fails, in the
// form the recompile log prints ("arg 0 dim 0: 32 -> 64").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/autocast.h"
#include "dsl/tensor.h"
#include "dsl/traced_grad_hooks.h"
#include "graph/sym_shape.h"

namespace kiln {

struct TensorGuard {
  enum class Layout { contiguous, dense, exact };
  DType dtype = DType::f32;
  Device device;
  bool requires_grad = false;
  std::vector<int64_t> sizes;  // the static size, or -1 where the dim is a symbol
  std::vector<int> symbols;    // the symbol (dense id) of each symbolic dim, else -1
  Layout layout = Layout::exact;
  std::vector<int> order;  // dense: dims from the largest stride to the smallest
  Strides strides;         // exact
};

// The thread's modes that change what a trace records: grad mode, and autocast (whose casts are
// nodes of the graph).
struct TraceModes {
  bool grad_mode = true;
  AutocastStates autocast;

  static TraceModes current();
};

// How a backward traced over a captured tensor treats its grad-ready hooks: it has none, they
// are traced into the graph, or the trace breaks and the tape runs them (no traced form, or one
// inactive: DistributedDataParallel's no_sync()).
enum class GradHooks { none, traced, eager };

class GuardSet {
 public:
  // From a finished trace: the arguments it saw, their symbolic shapes as the trace left them.
  GuardSet(const TensorList& args, const std::vector<SymShape>& arg_shapes, const std::vector<AttrValue>& statics,
           const TraceModes& modes, const TensorList& captured, std::vector<std::string> captured_names = {});

  // True when every guard holds; otherwise false, with the first failure in *why (if given).
  bool check(const TensorList& args, const std::vector<AttrValue>& statics, std::string* why = nullptr) const;
  // Static dims whose size differs in `args` (the dims automatic dynamic makes symbolic).
  std::vector<std::pair<int, int>> size_changes(const TensorList& args) const;
  std::vector<std::string> describe() const;  // one line per guard
  int symbol_count() const { return symbol_count_; }

 private:
  std::vector<TensorGuard> tensors_;
  std::vector<AttrValue> statics_;
  TraceModes modes_;
  TensorList captured_;
  std::vector<std::string> captured_names_;
  std::vector<bool> captured_requires_grad_;
  std::vector<GradHooks> captured_grad_hooks_;
  std::vector<std::weak_ptr<TracedGradHooks>> captured_traced_hooks_;  // the traced hooks themselves
  int symbol_count_ = 0;
};

std::string attr_value_str(const AttrValue& v);

// Dims ordered from the largest stride to the smallest (ties: the later dim is inner), and
// whether t is dense in that order (a permutation of a contiguous tensor; size-1 dims ignored).
std::vector<int> stride_order(const Strides& st);
bool dense_in_order(const TensorImpl& t, const std::vector<int>& order);
inline bool is_dense(const TensorImpl& t) { return dense_in_order(t, stride_order(t.strides)); }

}  // namespace kiln
