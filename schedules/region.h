// A region of a captured graph: a run of nodes that becomes one Halide pipeline (fusion.h plans
// them, lower_region.h lowers them). Only ids into the graph: the compile side and the run-time
// side (graph_executor.h) share it, and it needs no Halide.
#pragma once
#include <vector>

namespace kiln {

// A region's pipeline as compiled code: its argv entry point (inputs, symbol sizes, outputs).
using RegionFunction = int (*)(void**);

struct Region {
  std::vector<int> nodes;    // node indices, in graph order
  std::vector<int> inputs;   // value ids read from outside the region
  std::vector<int> outputs;  // value ids needed outside the region (or graph outputs)
  std::vector<int> symbols;  // root symbols of the region's dims: the pipeline's scalar params
  std::vector<int> packed;   // inputs read as packed weight panels (weight_packing.h) by a GEMM
  std::vector<int> in_place;  // outputs computed over an input's tensor (in_place.h)
  std::vector<int> recomputed;  // values another region makes, computed here again (fusion.cpp)
};

}  // namespace kiln
