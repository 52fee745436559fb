// Layouts of the GEMM steps on the CPU. The eager GEMM kernel walks its left operand along k; a
// left operand stored the other way round (a weight gradient's dy^T, a transposed view of the
// activations' gradient) turns its loads into long strides. It packs panels of its right operand
// along n; a right operand stored the other way round (a Linear's weight read as W^T) packs with
// gathers, once per 256 rows of the result. Measured on the 2-core build machine, f32, one GEMM,
// ms:
//   left:  [2048, 1024]^T x [1024, 512] 6.77 read transposed against 4.85 dense;
//          [512, 1024]^T x [1024, 2048] 5.96 against 5.31;
//   right (steps of a train step, W^T against a dense copy, median of 30 alternating runs):
//          [1024, 2048] x [512, 2048]^T 5.65 against 4.60; [1024, 512] x [2048, 512]^T 4.95
//          against 4.65; [1024, 512] x [1536, 512]^T 3.71 against 3.47.
// A dense copy made where the viewed value is computed (a second output of the pipeline that
// makes it; for a weight, a pipeline of its own at the start, 0.14 ms for 4 MB) costs a fraction
// of that. Weights of inference graphs are packed once per version instead (weight_packing.h).
//
//   int n = dense_gemm_operands(g);  // matmul(transpose(dy), x) -> matmul(contiguous(transpose(dy)), x)
#pragma once
#include "graph/graph.h"

namespace kiln {

// For each CPU matmul that runs as an eager GEMM step with a 2-D operand read across its layout
// (at least kDenseGemmMinRows rows and columns; a right operand only where the backend does not
// pack it as a weight), adds a dense copy of that operand right after the node that computes the
// value it views (first, for a graph input), and lets the matmul read the copy. Returns the
// operands copied.
int dense_gemm_operands(Graph& g);

}  // namespace kiln
