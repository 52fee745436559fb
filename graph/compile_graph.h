// The compile path of one captured graph, as one list of steps (like Halide's Lower.cpp): each
// step is logged under KILN_LOGS=graph and the graph is dumped where KILN_DEBUG_DIR points.
//   captured -> dead code -> common subexpressions -> view folding -> decompositions the
//   backend asks for -> dead code -> backend compile
#pragma once
#include <memory>
#include <string>

#include "graph/backend.h"
#include "graph/graph.h"

namespace kiln {

// `label` names the graph in logs and dump files ("mlp graph 1").
std::shared_ptr<CompiledGraph> compile_graph(const Graph& captured, Backend& backend, const BackendOptions& options,
                                             const std::string& label);

}  // namespace kiln
