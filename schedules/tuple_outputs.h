// Outputs of a region computed in one loop nest, as one Tuple-valued Func: one kernel that writes
// several tensors. kiln's lowering gives every stored value its own Func, and on CUDA each output
// Func is a kernel of its own; a pointwise value that a row op of its shape reads and that is also
// returned (GPT-2's residual sum before each layer norm) then costs a kernel that writes it and a
// second pass that reads it back. Paired with the row op, both are written by the row op's kernel
// from the one read of their inputs (torch.compile's Inductor fuses the same pair).
#pragma once

#include "schedules/lower_region.h"

namespace kiln {

// On CUDA: each pair of consecutive region outputs (a, b) where b is a row op of a's shape that
// reads a, a is a pointwise value nothing else in the region reads, both f32, becomes one Func
// Tuple(a, b) in lowered.outputs (its buffers in the same order as the region's outputs, so the
// backend binds them unchanged); lowered.output_values gives b as the value that schedules it.
void compute_outputs_together(const Graph& g, const Region& r, LoweredRegion& lowered);

}  // namespace kiln
