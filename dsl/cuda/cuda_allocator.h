// Device memory for CUDA tensors: a caching allocator per device over cuMemAlloc, so that steady
// state (the same sizes op after op, step after step) never calls the driver. Blocks of every
// size are cached (rounded to size classes, caching_allocator.h); a freed block is reused at
// once, which is safe because all kiln work runs in order on one stream.
//
//   MemoryStats s = cuda_caching_allocator(0).stats();   // allocated, reserved, peak
//   uint64_t n = cuda_driver_allocations();               // cuMemAlloc calls so far
#pragma once
#include <cstdint>

#include "dsl/caching_allocator.h"

namespace kiln {

// kiln::Error when CUDA is unavailable. Freed blocks stay cached until an allocation fails (then
// the cache is emptied and the allocation retried) or empty_cache(); KILN_CUDA_CACHE_MB caps the
// cached bytes instead (frees past the cap go to cuMemFree, which waits for the device).
CachingAllocator& cuda_caching_allocator(int index = 0);

// Calls of cuMemAlloc made by kiln's allocator (not Halide's), for tests.
uint64_t cuda_driver_allocations();

}  // namespace kiln
