// A view inside a pipeline: the input element that each output element of a view op reads, by
// the op's index rule (OpDef::view.index, beside its layout rule in dsl/ops/views.cpp), given the
// graph's knowledge of which dims are 1 and which runs of dims have equal sizes at every call.
// Views store nothing inside a region; a Func reading a view reads its input at these indices.
#pragma once
#include <Halide.h>

#include <vector>

#include "graph/graph.h"

namespace kiln {

// Whether dim d (outermost first) of value v has size 1 for every call: a constant 1, not a
// dynamic dim that happens to be 1. A broadcast reads index 0 along such a dim.
bool dim_is_one(const Graph& g, int v, size_t d);

// The index of n's input (Halide's order, innermost first) that n's output at `out_index` (same
// order) reads; in_shape and out_shape are the extents of n's input and output (outermost first).
std::vector<Halide::Expr> view_source_index(const Graph& g, const GraphNode& n, const std::vector<Halide::Expr>& out_index,
                                            const std::vector<Halide::Expr>& in_shape,
                                            const std::vector<Halide::Expr>& out_shape);

}  // namespace kiln
