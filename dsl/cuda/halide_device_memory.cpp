#include "dsl/cuda/halide_device_memory.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "dsl/cuda/cuda_api.h"

namespace kiln {

namespace {

std::mutex mu;
int holds = 0;
std::unordered_map<CUdeviceptr, size_t> sizes;                 // every block the runtime holds
std::unordered_map<size_t, std::vector<CUdeviceptr>> kept;     // freed while held, by size

CUresult halide_mem_alloc(CUdeviceptr* p, size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = kept.find(n);
    if (it != kept.end() && !it->second.empty()) {
      *p = it->second.back();
      it->second.pop_back();
      return 0;
    }
  }
  CUresult rc = cuda_api().cuMemAlloc(p, n);
  if (rc == 0) {
    std::lock_guard<std::mutex> lock(mu);
    sizes[*p] = n;
  }
  return rc;
}

CUresult halide_mem_free(CUdeviceptr p) {
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = sizes.find(p);
    if (holds > 0 && it != sizes.end()) {
      kept[it->second].push_back(p);
      return 0;
    }
    if (it != sizes.end()) sizes.erase(it);
  }
  return cuda_api().cuMemFree(p);
}

}  // namespace

void* kiln_halide_get_library_symbol(void* lib, const char* name) {
  if (std::strcmp(name, "cuMemAlloc_v2") == 0) return reinterpret_cast<void*>(&halide_mem_alloc);
  if (std::strcmp(name, "cuMemFree_v2") == 0) return reinterpret_cast<void*>(&halide_mem_free);
  return ::dlsym(lib ? lib : RTLD_DEFAULT, name);
}

HalideMemoryHold::HalideMemoryHold() {
  std::lock_guard<std::mutex> lock(mu);
  ++holds;
}

HalideMemoryHold::~HalideMemoryHold() {
  std::vector<CUdeviceptr> release;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (--holds > 0) return;
    for (auto& [n, list] : kept)
      for (CUdeviceptr p : list) {
        release.push_back(p);
        sizes.erase(p);
      }
    kept.clear();
  }
  for (CUdeviceptr p : release) cuda_api().cuMemFree(p);
}

}  // namespace kiln
