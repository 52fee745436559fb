// Whether a lowered CUDA pipeline reads and writes only inside its buffers at the region's traced
// sizes: every load and store of an input, an output or a constant-size allocation (shared memory,
// registers) has its flat index bounded by interval arithmetic over the loops, lets and guards
// around it, and one that can leave its buffer is reported. A guard Halide dropped (its vectorized
// GuardWithIf tails on CUDA, twice a source of out-of-bounds reads: CUDA error 700) shows here
// without a GPU. Conservative where bounds are loose: an index it cannot bound is counted, not
// reported.
//
//   auto bounds = record_gpu_bounds(pipeline, region_sizes(g, r, lowered));  // gpu_launch_check.h
//   pipeline.compile_to_module(args, "f", target);  // any compile of the pipeline
//   for (const std::string& w : bounds->outside) fail(w);
#pragma once
#include <Halide.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct GpuBounds {
  std::vector<std::string> outside;  // one line per access that can leave its buffer
  int checked = 0;                   // accesses bounded within their buffers
  int unbounded = 0;                 // accesses whose index could not be bounded
};

// Installs a lowering pass into p that bounds its accesses when p is next compiled; `sizes` gives
// the buffer fields (mins, extents, strides) and scalar parameters by the names the lowered code
// uses, as region_sizes() does.
std::shared_ptr<const GpuBounds> record_gpu_bounds(Halide::Pipeline& p, const std::map<std::string, int64_t>& sizes);

}  // namespace kiln
