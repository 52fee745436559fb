// A graph as text that reads back into the same graph: the shape environment's symbols, every
// value's metadata, layout and symbolic shape, the inputs, the nodes with their attributes
// (doubles exactly, as hexadecimal floats), the outputs, the in-place writes and the joint
// layout. Graph::text() is for reading; this is for storing a graph beside its compiled code
// (ahead-of-time model libraries) and loading it without tracing again.
//
//   std::string text = write_graph(g);
//   Graph same = read_graph(text);  // same.structural_hash() == g.structural_hash()
//
// One record per line, its fields separated by spaces; strings quoted as JSON strings:
//   kiln-graph 1
//   symbol 8 -1 0 "arg 0 dim 0" ""                  hint, union-find parent, specialized, source, why
//   value f32 cpu [8,256] [1.0,256] [256,1] 0 -1 0   dtype, device, shape, symbolic shape (coeff.sym.sym,
//                                                   ~ before an opaque dim), strides, offset, producer, output index
//   input 0 argument 0 0 "x"                        value, kind, index, requires grad, name
//   node matmul 1 [0,1] [2] 1                       op, grad enabled, inputs, outputs, attribute count
//   attr transpose_b b 1                            name, type (i d b s v), value
//   outputs [2]
//   write 0 1 / joint 1 [0,1] / backward_traced / trains
//   end
#pragma once
#include <string>
#include <string_view>

#include "graph/graph.h"

namespace kiln {

std::string write_graph(const Graph& g);
// kiln::Error naming the line for malformed text, an unknown op, dtype or device, or ids out of range.
Graph read_graph(std::string_view text);

}  // namespace kiln
