// Compiled regions as shared libraries: Halide objects built `no_runtime` are linked into one
// shared library per graph and dlopen'ed; they all call one standalone Halide runtime, itself a
// shared library in the disk cache, loaded once per process with RTLD_GLOBAL (DESIGN.md: one
// runtime per process). The runtime's allocations go to kiln's caching allocator and its errors
// become kiln::Error. The runtime includes Halide's CUDA runtime, with kiln's context and stream
// handlers installed (dsl/cuda/cuda_context.h); it loads libcuda only when a CUDA pipeline runs.
//
//   compile_region_object(pipeline, args, "kiln_region_0", dir + "/r0.o");
//   link_shared_library({dir + "/r0.o"}, dir + "/graph.so");
//   SharedLibrary lib(path);
//   auto fn = lib.function("kiln_region_0");  // int(void** args): inputs, params, outputs
//   call_region(fn, args, "a region of 7 ops");
#pragma once
#include <Halide.h>

#include <memory>
#include <string>
#include <vector>

#include "schedules/region.h"

namespace kiln {

// The target of cached code: the JIT target, ahead of time, without its own runtime; with
// `cuda`, plus CUDA (PTX for compute capability 8.0, which newer GPUs JIT-compile).
Halide::Target aot_target(bool cuda = false);

void compile_region_object(Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& args,
                           const std::string& function, const std::string& object_path, bool cuda = false);
// The same for several CPU targets (an ahead-of-time library that runs on other machines): one
// object per target and a wrapper, `function`, that calls the first target this CPU supports
// (Halide's compile_multitarget; the last target is the baseline). Each target gets no_runtime.
// Returns the objects' paths.
std::vector<std::string> compile_region_objects(Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& args,
                                                const std::string& function, const std::string& object_path,
                                                const std::vector<Halide::Target>& targets);

// The standalone runtime's CUDA device interface: halide_buffer_t.device_interface of CUDA
// buffers passed to cached pipelines (Halide refuses buffers of another runtime's interface).
const halide_device_interface_t* runtime_cuda_interface();

// Links objects into a shared library with the system C compiler (CC, else cc).
void link_shared_library(const std::vector<std::string>& objects, const std::string& library_path);
// Combines objects into one relocatable object (`cc -r`), for a static library; written to a
// temporary name, then renamed.
void link_relocatable_object(const std::vector<std::string>& objects, const std::string& object_path);
// An object that defines nothing (the regions' object of a graph without regions).
void write_empty_object(const std::string& object_path);

// A dlopen'ed library (closed with the last handle). Loading it first loads the runtime.
class SharedLibrary final : public CodeLibrary {
 public:
  explicit SharedLibrary(const std::string& path);
  RegionFunction function(const std::string& name) const override;
  const halide_device_interface_t* cuda_interface() const override { return runtime_cuda_interface(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<void> handle_;
};


}  // namespace kiln
