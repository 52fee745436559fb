// A library of the CUDA toolkit loaded once at run time (cuDNN, CUPTI, NCCL), the same way for
// each: nothing without a usable CUDA device, the first of its names that dlopen finds, every
// function `resolve_all` asks for, then the checks of `check` (a version). Either its API or the
// reason it is unavailable, in words a user can act on.
//
//   static const CudaLibrary<NcclApi> nccl = load_cuda_library<NcclApi>(
//       {"libnccl.so.2", ...}, "NCCL (libnccl.so.2)", "libnccl", [](void* lib, NcclApi& a, std::string& missing) {
//         resolve(lib, "ncclGetVersion", a.ncclGetVersion, missing); ... });
#pragma once
#include <functional>
#include <initializer_list>
#include <string>

#include "dsl/cuda/cuda_api.h"
#include "dsl/cuda/dynamic_library.h"

namespace kiln {

template <typename Api>
struct CudaLibrary {
  Api api{};
  std::string reason;  // "" when loaded
  bool available() const { return reason.empty(); }
};

// `what`: the library in an "is not on the library path" message; `file`: its name in "lacks
// <functions>"; `check(api)`: "" or why this build of the library will not do.
template <typename Api>
CudaLibrary<Api> load_cuda_library(std::initializer_list<const char*> names, const std::string& what,
                                   const std::string& file,
                                   const std::function<void(void*, Api&, std::string&)>& resolve_all,
                                   const std::function<std::string(void*, const Api&)>& check = nullptr) {
  CudaLibrary<Api> l;
  if (!cuda_available()) {
    l.reason = "no CUDA device is usable: " + cuda_unavailable_reason();
    return l;
  }
  void* lib = open_first(names);
  if (!lib) {
    l.reason = what + " is not on the library path";
    return l;
  }
  std::string missing;
  resolve_all(lib, l.api, missing);
  if (!missing.empty()) l.reason = file + " lacks " + missing;
  else if (check) l.reason = check(lib, l.api);
  return l;
}

}  // namespace kiln
