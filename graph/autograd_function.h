// A compiled joint graph on the eager tape (like PyTorch's autograd.Function): each call runs the
// compiled forward graph; when grad mode is on and an input requires grad, the outputs that carry
// gradient hang from one tape node, "CompiledFunctionBackward", holding the tensors the forward
// saved. backward() reaching it runs the compiled backward graph and hands each input its
// gradient, so gradients reach leaves (and eager nodes before the function) as in eager mode.
#pragma once
#include <memory>

#include "graph/backend.h"
#include "graph/partition.h"

namespace kiln {

// `joint` is the graph `p` was cut from; `forward` and `backward` are p's halves, compiled.
std::shared_ptr<CompiledGraph> make_autograd_function(const Graph& joint, const Partition& p,
                                                      std::shared_ptr<CompiledGraph> forward,
                                                      std::shared_ptr<CompiledGraph> backward);

}  // namespace kiln
