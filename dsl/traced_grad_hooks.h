// The form of a leaf's grad-ready hooks (Tensor::on_grad_ready) that a compiled backward can
// trace: DistributedDataParallel's bucketed all-reduce. A backward traced inside compile() over
// leaves with hooks and no traced form breaks the trace and runs eagerly; with one, the hooks'
// work becomes nodes of the backward graph:
//
//   for each group, in order, once the last of its leaves' gradients is final:
//     started = start(group, their gradients)     traced where the backward is then
//   after the rest of the backward:
//     gradients = finish(group, started)          what grad() of each leaf becomes
//
// so work that start() sets going (an all-reduce) overlaps the rest of the backward. start() and
// finish() are called while the tracer records every op they call. A compiled function guards on
// active() of the hooks of the tensors it captured.
#pragma once
#include <memory>
#include <vector>

#include "dsl/tensor.h"

namespace kiln {

class TracedGradHooks {
 public:
  virtual ~TracedGradHooks() = default;
  // False while the hooks do nothing (DistributedDataParallel's no_sync()): the backward is
  // then not traced over them.
  virtual bool active() const = 0;
  // The groups of leaves whose gradients go together, in the order they must start (the same on
  // every rank).
  virtual std::vector<TensorList> groups() const = 0;
  // Group g's gradients, final, in groups()'s order (undefined where a leaf got none).
  virtual Tensor start(int g, const TensorList& grads) = 0;
  // The gradients group g's leaves end with, in groups()'s order.
  virtual TensorList finish(int g, const Tensor& started) = 0;
};

// The traced form a compiled backward uses for t's hooks now: null where t has no hooks, where
// they have no traced form (the trace breaks) or where it is inactive (the trace breaks too;
// the eager hooks then do what they do in no_sync()).
inline std::shared_ptr<TracedGradHooks> active_traced_grad_hooks(const Tensor& t) {
  std::shared_ptr<TracedGradHooks> h = t.has_grad_ready_hooks() ? t.traced_grad_hooks() : nullptr;
  return h && h->active() ? h : nullptr;
}

}  // namespace kiln
