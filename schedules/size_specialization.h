// Size specializations of a region's pipeline (SizeCondition, object_export.h): for each
// condition on a dim that is one of the region's symbols, every output Func gets a specialize()
// branch taken when the condition holds. The branch copies the schedule as it stands, so call
// this after scheduling; Halide compiles it knowing the condition (a vector loop over a
// multiple of its width needs no tail), and the generic code stays for every other size.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "schedules/lower_region.h"
#include "schedules/object_export.h"

namespace kiln {

// The conditions applied, as "x.1 % 64 == 0 (s1)"; conditions on dims the region does not size
// by are skipped.
std::vector<std::string> specialize_sizes(const Graph& g, LoweredRegion& lowered,
                                          const std::vector<SizeCondition>& conditions);

}  // namespace kiln
