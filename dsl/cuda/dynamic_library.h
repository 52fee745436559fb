// Loading a library at run time, as kiln loads the CUDA driver, cuBLAS, cuDNN and CUPTI (so that
// kiln builds and runs without them): the first of several names that dlopen finds, and its
// functions by name, each missing one named in a list for the error.
//
//   void* lib = open_first({"libfoo.so.1", "libfoo.so"});
//   std::string missing;
//   resolve(lib, "fooInit", api.fooInit, missing);   // missing: "fooInit, fooRun" when absent
#pragma once
#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace kiln {

// The handle of the first of `names` that dlopen loads (RTLD_NOW | RTLD_GLOBAL), or null.
inline void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
  return nullptr;
}

// Sets `slot` to the function `name` of `lib`; where there is none, adds the name to `missing`.
template <typename F>
bool resolve(void* lib, const char* name, F& slot, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  if (!slot) missing += std::string(missing.empty() ? "" : ", ") + name;
  return slot != nullptr;
}

}  // namespace kiln
