// In-place outputs: a function's write into a tensor the graph also reads (Graph::writes: an
// optimizer's new parameter and state) is computed straight into that tensor's memory, so the
// write-back after the run copies nothing. Allowed when nothing can tell: the output's region
// reads the old value only inside the output's own pointwise expression, at the element it
// writes (p_new = p * decay - step), and no later step reads the old value or a view of it.
//
// A region's output may likewise take the memory of an intermediate that dies in that region
// (reused_intermediates): the GEMM result a bias add reads, the gradient a derivative scales. The
// output then writes lines the region has just read, instead of a fresh buffer whose lines the
// CPU must first fetch (write-allocate), and the step needs one buffer fewer.
//
//   auto into = in_place_outputs(g, plan);  // output value -> the input positions bound to its tensor
//   auto over = reused_intermediates(g, plan, into);  // output value -> the intermediate it overwrites
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "schedules/fusion.h"

namespace kiln {

std::map<int, std::vector<int>> in_place_outputs(const Graph& g, const std::vector<PlannedStep>& steps);

// Region outputs that can be computed over an intermediate the region reads: one a pipeline or a
// GEMM made (so its memory is its own), of the output's shape and dtype, read by no later step
// (nor through a view) and by this region only inside the output's own pointwise expression. The
// outputs in `in_place` are left alone. At run time the backend still checks that nothing else
// holds the intermediate's memory.
std::map<int, int> reused_intermediates(const Graph& g, const std::vector<PlannedStep>& steps,
                                        const std::map<int, std::vector<int>>& in_place);

// At run time the graph executor computes these outputs in place (in_place_outputs_run(),
// graph_executor.h, counts them).

}  // namespace kiln
