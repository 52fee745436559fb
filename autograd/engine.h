// The backward engine: from a root tensor and its gradient, runs the nodes of the tape in
// reverse topological order, sums gradients that meet, and accumulates into leaves' grad().
#pragma once
#include <string>

#include "dsl/tensor.h"

namespace kiln {

// create_graph is refused (kiln::Error): the tape saves detached tensors, and a compiled
// function's backward is a compiled graph, so neither can be differentiated again.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph = false);

// Told about each backward node the engine runs, before and after it (a profiler's hook: `kiln
// bench gpu --size real` times an eager step's backward by node with it). The gradients' sums
// into leaves count as a node named "accumulate_grad".
class BackwardNodeObserver {
 public:
  virtual ~BackwardNodeObserver() = default;
  virtual void before(const std::string& node) = 0;
  virtual void after(const std::string& node) = 0;
};

// Installs `observer` for this thread's backward passes (null removes it); returns the previous one.
BackwardNodeObserver* set_backward_node_observer(BackwardNodeObserver* observer);

}  // namespace kiln
