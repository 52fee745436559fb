// The model of examples/02_graph_break.cpp (also `kiln explain graph_break` / `graph_break_where`):
// a two-layer MLP whose forward halves its hidden activations when their mean is large. Written
// with a host branch on a tensor's value, it breaks the graph in two; written with where(), the
// same computation captures as one graph.
#pragma once
#include "kiln.h"

namespace kiln::examples {

struct BranchyModel {
  nn::Linear fc1{16, 32}, fc2{32, 16};

  Tensor forward_with_break(const Tensor& x) {
    Tensor h = relu(fc1.forward(x));
    if (h.mean().item<float>() > 0.5f) h = h * 0.5;  // a branch on a value: a graph break here
    return fc2.forward(h);
  }

  Tensor forward_with_where(const Tensor& x) {
    Tensor h = relu(fc1.forward(x));
    h = where(gt(h.mean(), 0.5), h * 0.5, h);  // the same choice, made inside the graph
    return fc2.forward(h);
  }
};

}  // namespace kiln::examples
