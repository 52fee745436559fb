// Regions that lower to the same pipeline: a region's signature names everything its lowering and
// schedule read (each node's op and attributes, how the nodes are wired, every value's dtype,
// shape, symbolic shape, layout and offset, the region's inputs, outputs, packed weights, in-place
// outputs, recomputed values and symbols) with value ids replaced by their order in the region.
// GPT-2's twelve layers make twelve copies of each region, and an optimizer's update of
// same-shaped parameters one per parameter: the halide backend compiles one pipeline per
// signature and calls it for every region that has it.
//
//   std::vector<int> first = first_with_same_signature(g, regions);   // first[i] <= i
#pragma once
#include <string>
#include <vector>

#include "schedules/lower_region.h"

namespace kiln {

std::string region_signature(const Graph& g, const Region& r);

// For each region, the index of the first region with the same signature (itself if none before).
std::vector<int> first_with_same_signature(const Graph& g, const std::vector<const Region*>& regions);

}  // namespace kiln
