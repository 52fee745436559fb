// The compile path of one captured graph, as one list of steps (like Halide's Lower.cpp): each
// step is logged under KILN_LOGS=graph and the graph is dumped where KILN_DEBUG_DIR points.
//   captured -> dead code -> common subexpressions -> view folding -> transposed matmuls ->
//   decompositions the backend asks for -> common subexpressions -> dead code -> backend compile
// A joint forward+backward graph (graph/autodiff.h) goes through the same passes as one graph
// (so the backward shares the forward's subexpressions), then the min-cut partition
// (graph/partition.h, logged under KILN_LOGS=partition) splits it and each half is compiled;
// the result runs on the eager tape (graph/autograd_function.h).
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
