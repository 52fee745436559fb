// A graph's compiled regions as one shared library in the disk cache (disk_cache.h), keyed by
// everything the generated code depends on: built once (distinct pipelines only, compiled side by
// side on KILN_COMPILE_THREADS threads), linked, stored atomically, and loaded by later processes
// without lowering or LLVM. Under an ObjectExport (AOT models) the objects go to the export instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "schedules/region_build.h"
#include "schedules/shared_library.h"

namespace kiln {

// The cache key of a graph compiled with fusion plan `plan` (its text), its region `steps` (CUDA
// regions with schedule files of their own add those, region_schedule.h) and `options`.
std::string graph_key(const Graph& g, const std::string& plan, const std::vector<RegionStep>& steps,
                      const BackendOptions& options);

// Compiles the region steps into one shared library in the disk cache (unless it is there
// already), one function per distinct pipeline named after `prefix`, and points each region step
// at its function. Under an ObjectExport, the cache is left alone: the library is built and loaded
// from a scratch folder, and its objects go to the export.
std::shared_ptr<SharedLibrary> load_or_build(const Graph& g, const std::string& plan, std::vector<RegionStep>& steps,
                                             const BackendOptions& options, const std::string& prefix);

}  // namespace kiln
