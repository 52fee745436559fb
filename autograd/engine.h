// The backward engine: from a root tensor and its gradient, runs the nodes of the tape in
// reverse topological order, sums gradients that meet, and accumulates into leaves' grad().
#pragma once
#include "dsl/tensor.h"

namespace kiln {

// create_graph is refused (kiln::Error): the tape saves detached tensors, and a compiled
// function's backward is a compiled graph, so neither can be differentiated again.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph = false);

}  // namespace kiln
