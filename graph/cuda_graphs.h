// Compiled calls replayed as CUDA graphs, as torch.compile's mode="reduce-overhead" does:
// `compile(f, {.mode = "reduce-overhead"})`, or KILN_CUDA_GRAPHS=1 for every compile. A graph's
// launches (pipelines, cuBLAS, cuDNN, copies) are captured once per input layout and replayed
// with one launch, so a call costs the host one launch instead of one per kernel.
//
// Per layout of the inputs (shapes, strides, dtypes): the first two calls run as usual (the first
// loads kernels and picks cuBLAS and cuDNN plans); the third is captured, then launched; later
// calls replay. Inputs at the same address in both warm-up calls (parameters, optimizer state)
// are read in place; inputs whose address changed (a new batch each call) are copied into
// buffers of the graph before each replay. Everything the captured call allocates comes from a
// private memory pool (CachingAllocator::create_pool) that nothing else is given, and the blocks
// Halide's runtime frees are kept while the graph lives (dsl/cuda/halide_device_memory.h).
//
// Outputs live in the graph's memory, which the next replay of the same graph overwrites. An
// output (or a view of it) still referenced when that replay starts is first copied to memory of
// its own, one device copy each, so kept outputs keep their values (`losses.push_back(step(x))`
// is right); PyTorch's CUDA graphs raise an error on such reads instead.
//
// A call that cannot be captured runs as before, and its reason is logged once
// (KILN_LOGS=perf_hints): inputs on the CPU, outputs that record autograd history (a backward
// would read tensors the next replay overwrites), a host wait or a copy between host and device
// inside the call (an item(), a value made on the host), random draws (a replay would repeat
// them), an input read in place whose address changed (captured again), a changing input that is
// not contiguous, more than 8 layouts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "graph/backend.h"

namespace kiln {

// `g` compiled (`inner`), wrapped so that its calls on CUDA inputs are captured and replayed.
std::shared_ptr<CompiledGraph> with_cuda_graphs(const Graph& g, std::shared_ptr<CompiledGraph> inner, std::string label);

// Whether a compile with `mode` ("default", "reduce-overhead") replays CUDA graphs; kiln::Error
// for another mode. KILN_CUDA_GRAPHS=1 turns them on for "default" too.
bool cuda_graphs_wanted(const std::string& mode);

// Process-wide counts, for tests and benchmarks.
struct CudaGraphCounters {
  uint64_t captures = 0;   // graphs captured
  uint64_t replays = 0;    // calls that launched a graph (the capturing call included)
  uint64_t fallbacks = 0;  // calls run without one after their layout could not be captured
};
CudaGraphCounters cuda_graph_counters();

}  // namespace kiln
