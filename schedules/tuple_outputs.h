// Outputs of a region computed in one loop nest, as one Tuple-valued Func: one kernel that writes
// several tensors. kiln's lowering gives every stored value its own Func, and on CUDA each output
// Func is a kernel of its own; a pointwise value that a row op of its shape reads and that is also
// returned (GPT-2's residual sum before each layer norm) then costs a kernel that writes it and a
// second pass that reads it back. Paired with the row op, both are written by the row op's kernel
// from the one read of their inputs (torch.compile's Inductor fuses the same pair). Likewise an
// optimizer's update writes the new parameter and its state, all of one shape: as separate Funcs
// the parameter's kernel recomputed the state from its inputs; as one Tuple each input is loaded
// once.
#pragma once

#include "schedules/lower_region.h"

namespace kiln {

// On CUDA: each pair of consecutive region outputs (a, b) where b is a row op of a's shape that
// reads a (or b casts such a row op's result, fused into it: autocast's bf16 layer norm), a is a
// pointwise value nothing else in the region reads, both f32 (b cast), becomes one Func
// Tuple(a, b) in lowered.outputs (its buffers in the same order as the region's outputs, so the
// backend binds them unchanged); lowered.output_values gives b as the value that schedules it.
// Then each run of two or more consecutive outputs that are f32 pointwise values of one shape,
// whose readers in the region lead only into the run's own values (through pointwise values
// stored nowhere else), becomes one Tuple scheduled as its last value. A value read by another
// kernel of the pipeline stays out: inlined into the Tuple, that kernel would compute it again
// from inputs the Tuple may have overwritten (in_place.h).
void compute_outputs_together(const Graph& g, const Region& r, LoweredRegion& lowered);

}  // namespace kiln
