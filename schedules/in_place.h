// In-place outputs: a function's write into a tensor the graph also reads (Graph::writes: an
// optimizer's new parameter and state) is computed straight into that tensor's memory, so the
// write-back after the run copies nothing. Allowed when nothing can tell: the output's region
// reads the old value only inside the output's own pointwise expression, at the element it
// writes (p_new = p * decay - step), and no later step reads the old value or a view of it.
//
//   auto into = in_place_outputs(g, plan);  // output value -> the input positions bound to its tensor
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "schedules/fusion.h"

namespace kiln {

std::map<int, std::vector<int>> in_place_outputs(const Graph& g, const std::vector<PlannedStep>& steps);

// Outputs the halide backend has computed in place in this process so far (at run time it still
// checks that no other input shares the tensor's memory; otherwise the output gets its own).
int64_t in_place_outputs_run();
void count_in_place_outputs(int64_t n);

}  // namespace kiln
