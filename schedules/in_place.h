// In-place outputs: a function's write into a tensor the graph also reads (Graph::writes: an
// optimizer's new parameter and state) is computed straight into that tensor's memory, so the
// write-back after the run copies nothing. Allowed when nothing can tell: the output's region
// reads the old value only inside the output's own pointwise expression, at the element it
// writes (p_new = p * decay - step), and no later step reads the old value or a view of it.
//
//   std::map<int, int> into = in_place_outputs(g, plan);  // output value -> input position
#pragma once
#include <map>
#include <vector>

#include "schedules/fusion.h"

namespace kiln {

std::map<int, int> in_place_outputs(const Graph& g, const std::vector<PlannedStep>& steps);

}  // namespace kiln
