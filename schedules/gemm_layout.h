// Layouts of the GEMM steps on the CPU. The eager GEMM kernel walks its left operand along k; a
// left operand stored the other way round (a weight gradient's dy^T, a transposed view of the
// activations' gradient) turns its loads into long strides. Measured on the 2-core build machine,
// f32, one GEMM, ms: dy^T x for [2048, 1024]^T x [1024, 512] 6.77 read transposed against 4.85
// dense; [512, 1024]^T x [1024, 2048] 5.96 against 5.31. A dense copy made where the viewed value
// is computed (a second output of the pipeline that makes it) costs a fraction of that.
//
//   int n = dense_gemm_operands(g);  // matmul(transpose(dy), x) -> matmul(contiguous(transpose(dy)), x)
#pragma once
#include "graph/graph.h"

namespace kiln {

// For each CPU matmul that runs as an eager GEMM step with a 2-D left operand read across its
// layout (at least kDenseGemmMinRows rows and columns), adds a dense copy of that operand right
// after the node that computes the value it views, and lets the matmul read the copy. Returns
// the operands copied.
int dense_gemm_operands(Graph& g);

}  // namespace kiln
