// The device memory Halide's CUDA runtime allocates for a pipeline's intermediates, kept safe for
// CUDA graphs. The runtime caches freed blocks (halide_reuse_device_allocations) but gives the
// oldest back to the driver (cuMemFree) once it caches more than 32, and all of them when an
// allocation fails. A CUDA graph replays into the blocks its capture was given, so a block given
// back could by then hold a tensor. While a graph lives, kiln keeps the blocks the runtime frees
// and hands them back to it for allocations of the same size, instead of to the driver.
//
// The runtime finds cuMemAlloc_v2 and cuMemFree_v2 through halide_get_library_symbol;
// kiln_halide_get_library_symbol (installed with halide_set_custom_get_library_symbol into the
// eager kernels' runtime and into that of cached pipelines) answers those two with kiln's and
// everything else as the runtime's default does (dlsym).
//
//   HalideMemoryHold hold;   // while a captured graph lives
#pragma once
#include <cstddef>

namespace kiln {

void* kiln_halide_get_library_symbol(void* lib, const char* name);

// While any hold exists, blocks Halide's runtime frees are kept for it; when the last goes, they
// go back to the driver.
class HalideMemoryHold {
 public:
  HalideMemoryHold();
  ~HalideMemoryHold();
  HalideMemoryHold(const HalideMemoryHold&) = delete;
  HalideMemoryHold& operator=(const HalideMemoryHold&) = delete;
};

}  // namespace kiln
