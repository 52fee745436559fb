// The backward engine: from a root tensor and its gradient, runs the nodes of the tape in
// reverse topological order, sums gradients that meet, and accumulates into leaves' grad().
#pragma once
#include "dsl/tensor.h"

namespace kiln {

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace kiln
