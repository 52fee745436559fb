// Fusion: which nodes of a captured graph share a pipeline. A graph becomes a list of steps, each
// a region (a maximal run of lowerable nodes, one Halide pipeline) or a single node that runs
// through its eager kernel; every cut between regions has a reason (KILN_LOGS=fusion and the debug
// dump print them). Inside a region, lower_region decides what is materialized.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "schedules/region.h"

namespace kiln {

struct PlannedStep {
  int node = -1;       // an eager node, or -1 for a region
  Region region;       // when node < 0
  std::string reason;  // why the node is not in a pipeline
};

std::vector<PlannedStep> plan_fusion(const Graph& g);

// Per node, the step that computes it (-1: none; a value recomputed by several regions: the last).
std::vector<int> step_of_nodes(const Graph& g, const std::vector<PlannedStep>& steps);

// One line per step: "region 0: 5 ops [%3 %4 ...] -> %9" / "eager matmul %7: matmul runs ...".
std::string fusion_text(const Graph& g, const std::vector<PlannedStep>& steps);

}  // namespace kiln
