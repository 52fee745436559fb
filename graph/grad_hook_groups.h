// A backward traced over leaves whose grad-ready hooks have a traced form (dsl/traced_grad_hooks.h,
// DistributedDataParallel's buckets): the tracer's side. Each group starts, in its hooks' order,
// as soon as the last of its leaves' gradients is final; after the rest of the backward, every
// group finishes and gives its leaves' gradients.
//
//   GradHookGroups groups(leaves);                        // the backward's leaves
//   record_gradients(..., [&](size_t k, const Tensor& g) { groups.final(k, g); });
//   for (auto& [leaf, grad] : groups.finish()) ...        // what grad() of each becomes
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "dsl/traced_grad_hooks.h"

namespace kiln {

class GradHookGroups {
 public:
  // The traced hooks of `leaves` (active_traced_grad_hooks), each set once.
  explicit GradHookGroups(const TensorList& leaves);
  bool empty() const { return sets_.empty(); }
  // Whether leaves[k]'s gradient goes through traced hooks (finish() gives it, not the walk).
  bool handles(size_t k) const { return slot_of_[k].first >= 0; }
  // leaves[k]'s gradient is final (undefined: it got none).
  void final(size_t k, const Tensor& grad);
  // Starts the groups still waiting (their other leaves got no gradient), then finishes every
  // group: each leaf of each group (also those not among `leaves`) with its new gradient.
  std::vector<std::pair<Tensor, Tensor>> finish();

 private:
  struct Set {
    std::shared_ptr<TracedGradHooks> hooks;
    std::vector<TensorList> groups;
    std::vector<TensorList> grads;    // per group, per leaf (undefined until final)
    std::vector<size_t> waiting;      // per group: leaves among `leaves` not final yet
    std::vector<Tensor> started;      // per group, once started
    size_t next = 0;                  // the next group to start
  };
  void start_ready(Set& s);

  std::vector<Set> sets_;
  std::vector<std::pair<int, std::pair<int, int>>> slot_of_;  // per leaf k: set, (group, position); set -1: none
};

}  // namespace kiln
