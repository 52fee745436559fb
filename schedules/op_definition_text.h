// A user's Halide op (graph/halide_op.h) as its definition prints: what the generated code depends
// on beyond the graph, and what kiln's version stamp does not cover, so the disk cache's key holds
// it. Halide's generated names (f12, v3, r4$x, repeat_edge$2) are numbered in the order the text
// meets them, so one definition prints the same in every process.
#pragma once
#include <string>

#include "graph/graph.h"

namespace kiln {

// The definition of node n's op (pointwise: its Expr over one variable per input; over whole
// tensors: every Func it defines from placeholder inputs, updates and their domains included).
std::string op_definition_text(const GraphNode& n, const Graph& g);

}  // namespace kiln
