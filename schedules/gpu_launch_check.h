// Whether a lowered CUDA pipeline spreads its work over the GPU: every kernel (the loops Halide
// marked gpu_block / gpu_thread) is measured at the region's traced sizes, and one that does a lot
// of work (2^20 iterations or more) with few threads (under 64 blocks or 16384 threads) is
// reported, as is a host loop that launches a kernel per iteration over many iterations. Such a
// kernel is a schedule bug at real sizes (a 50304-row optimizer update in one thread takes a
// second); the backend prints each finding as a warning and tests/schedules/ fails on any.
//
//   auto launches = record_gpu_launches(pipeline, region_sizes(g, r, lowered));
//   pipeline.compile_to_module(args, "f", target);      // any compile of the pipeline
//   for (const std::string& w : narrow_gpu_launches(*launches)) warn(w);
#pragma once
#include <Halide.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "schedules/lower_region.h"

namespace kiln {

// Installs a lowering pass into p that hands `look` the lowered statement (with its GPU loops, before
// Halide moves them into device code) each time p is compiled, and changes nothing. The launch
// check below and gpu_bounds_check.h inspect pipelines this way.
void inspect_lowered(Halide::Pipeline& p, std::function<void(const Halide::Internal::Stmt&)> look);

// One kernel of a lowered pipeline, at known sizes (-1 where a size stayed symbolic).
struct GpuLaunch {
  std::string loop;          // its outermost GPU loop ("f3.s0.x.bx")
  int64_t blocks = 1;        // product of the gpu_block extents
  int64_t threads = 1;       // threads per block (the widest gpu_thread nest)
  int64_t per_thread = 1;    // iterations of the longest serial nest inside one thread
  int64_t launches = 1;      // host loop iterations around the kernel
  bool known = true;         // every extent above is a constant
  int64_t work() const { return blocks * threads * per_thread; }
};

// Installs a lowering pass into p that records its kernels (before Halide moves them into device
// code) when p is next compiled; `sizes` gives the values of the buffer fields and scalar
// parameters the loops depend on ("in0.extent.1" -> 768, "s0" -> 8).
std::shared_ptr<const std::vector<GpuLaunch>> record_gpu_launches(Halide::Pipeline& p,
                                                                  const std::map<std::string, int64_t>& sizes);

// The buffer extents, mins and strides of the region's inputs and outputs (dense, as traced) and
// its symbols' hints, by the names the lowered code uses.
std::map<std::string, int64_t> region_sizes(const Graph& g, const Region& r, const LoweredRegion& lowered);

// One line per kernel that runs a large loop on few threads, or launch loop on the host; empty
// when the schedule spreads every loop.
std::vector<std::string> narrow_gpu_launches(const std::vector<GpuLaunch>& launches);

}  // namespace kiln
