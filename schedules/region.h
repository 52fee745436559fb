// A region of a captured graph: a run of nodes that becomes one Halide pipeline (fusion.h plans
// them, lower_region.h lowers them). Only ids into the graph: the compile side and the run-time
// side (graph_executor.h) share it, and it needs no Halide.
#pragma once
#include <string>
#include <vector>

struct halide_device_interface_t;  // HalideRuntime.h

namespace kiln {

// A region's pipeline as compiled code: its argv entry point (inputs, symbol sizes, outputs).
using RegionFunction = int (*)(void**);

// Where regions' compiled code is found by name: a shared library of the disk cache
// (shared_library.h), or an ahead-of-time model's table of functions. It stays loaded while
// something holds it.
class CodeLibrary {
 public:
  virtual ~CodeLibrary() = default;
  // kiln::Error when there is no such function.
  virtual RegionFunction function(const std::string& name) const = 0;
  // The CUDA device interface of the Halide runtime the functions call, which CUDA buffers passed
  // to them carry (Halide refuses a buffer of another runtime's interface); kiln::Error where the
  // code runs on the CPU only.
  virtual const halide_device_interface_t* cuda_interface() const = 0;
};

// Calls a region's argv entry point; a Halide error becomes a kiln::Error naming `what`.
void call_region(RegionFunction fn, void** args, const std::string& what);

struct Region {
  std::vector<int> nodes;    // node indices, in graph order
  std::vector<int> inputs;   // value ids read from outside the region
  std::vector<int> outputs;  // value ids needed outside the region (or graph outputs)
  std::vector<int> symbols;  // root symbols of the region's dims: the pipeline's scalar params
  std::vector<int> packed;   // inputs read as packed weight panels (weight_packing.h) by a GEMM
  std::vector<int> in_place;  // outputs computed over an input's tensor (in_place.h)
  std::vector<int> recomputed;  // values another region makes, computed here again (fusion.cpp)
};

}  // namespace kiln
