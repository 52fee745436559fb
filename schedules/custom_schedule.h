// The schedule of a user's op defined over whole tensors (graph/halide_op.h's `define`), whose
// definition kiln knows nothing about: its output is a root of the region like any stored value
// (cpu_schedule.cpp, gpu_schedule.cpp); the Funcs of its definition with update definitions
// (reductions, and the scatters of propagate_adjoints gradients) are computed whole, at the
// pipeline's root, before it. Their pure definitions run in parallel; an update in parallel where
// it writes each element from that element alone (its left side is the pure vars, and it reads
// itself only there; a long sum into each element in vector partial sums on the CPU, a warp an
// element on CUDA),
// as an atomic scatter on CUDA where it adds into elements its reduction domain picks, else
// serially.
#pragma once
#include <Halide.h>

#include "graph/graph.h"
#include "schedules/cpu_tuning.h"

namespace kiln {

// Whether value v is the output of a user's op defined over whole tensors.
bool custom_definition(const Graph& g, int v);

// How update u of f writes.
enum class UpdateWrites { own_elements, accumulates, other };
UpdateWrites update_writes(const Halide::Func& f, int u);

// f (a Func of the definition with update definitions), computed whole, on the CPU or on CUDA.
void schedule_custom_inner_cpu(Halide::Func f, const CpuTuning& tuning);
void schedule_custom_inner_gpu(Halide::Func f);

}  // namespace kiln
