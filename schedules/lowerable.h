// Which nodes of a captured graph the Halide lowering (schedules/lower_region.h) covers, and the
// kinds of pointwise node that fusion and lowering tell apart. The rules read the ops' OpDef
// properties (pointwise, cheap, gemm, random, host_checked); nodes not covered run through their
// eager kernels between pipelines.
#pragma once
#include "graph/graph.h"

namespace kiln {

// Whether the node is one pointwise expression of its inputs (unary, binary, where, cast, or a
// copy, which may read through a view).
bool is_pointwise(const GraphNode& n);

// Whether the node is pointwise at the element it writes: is_pointwise, but not a copy (which may
// read its input through a view, elsewhere than the element it writes).
bool is_elementwise(const GraphNode& n);

// Whether the node is one pointwise op cheap enough to compute again wherever it is read rather
// than store (a comparison, a select, an add, a multiply, ...).
bool is_cheap_pointwise(const GraphNode& n);

// Ops whose eager runners check indices or targets on the host (OpDef::host_checked) run as eager
// steps: a pipeline would clamp a bad index rather than report it. On CUDA the eager kernels clamp
// too (reading device indices on the host waits for the stream; KILN_CHECK_INDICES=1 does, and
// is read when a graph compiles), so there a gather (embedding) is lowered with its definition's
// clamp and fuses with its readers: GPT's token and position embeddings, their sum and the first
// layer_norm become one kernel, as in torch.compile. Whether n is such a gather, with a table
// that no other pipeline op reads (a row schedule would bound its reads to a row; the split
// cross-entropy's gather of target logits stays eager). Other
// host-checked ops keep their eager kernels (cross_entropy's tuned rows; a scatter-add pipeline
// would add its rows one after another).
bool clamped_gather(const Graph& g, const GraphNode& n);

// Whether the Halide lowering covers this node (others run through their eager kernels).
bool lowerable(const Graph& g, const GraphNode& n);

// Whether a matmul runs as a GEMM inside a pipeline: f32, b a packed weight (static K and N >= 32)
// read by this matmul only, a 2-D, at most 256 rows and 1 MiB (as traced).
bool gemm_lowerable(const Graph& g, const GraphNode& n);

}  // namespace kiln
