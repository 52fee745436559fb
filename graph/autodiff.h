// Graph-level autodiff: the backward of a traced graph, recorded into the same graph by the very
// derivative rules the eager tape runs (autograd/derivatives.cpp). The tracer replays each rule
// on symbolic tensors, so every op a rule calls becomes a graph node (run with grad off).
//
// Two users:
//   - a compiled function whose inputs require grad: at the end of each graph the tracer appends
//     one tangent input per output that carries gradient and the gradients of the inputs that
//     require grad, making a joint forward+backward graph (Graph::joint), which
//     graph/partition.h splits into a forward and a backward graph;
//   - backward() called inside a compiled function (a training step): the gradients of the leaves
//     become graph values, stored as the leaves' grad() (see Tracer::backward).
#pragma once
#include <functional>
#include <vector>

#include "dsl/tensor.h"

namespace kiln {

class Tracer;

// Records d(roots)/d(wrt) into the tracer's current graph: `seeds[k]` is the gradient flowing
// into `roots[k]` (values of the current graph); returns one gradient per `wrt` value, undefined
// where no gradient reaches it. Gradients that meet are summed, as on the eager tape.
// `on_final(k, gradient)`, if given, is called once for each wrt[k] as soon as its gradient is
// final (no node recorded later adds to it), while the rest of the backward is still to be
// recorded: ops it calls are recorded there.
TensorList record_gradients(Tracer& tracer, const std::vector<int>& roots, const TensorList& seeds,
                            const std::vector<int>& wrt,
                            const std::function<void(size_t k, const Tensor& gradient)>& on_final = {});

}  // namespace kiln
