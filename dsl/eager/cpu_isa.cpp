#include "dsl/eager/cpu_isa.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace kiln {

namespace {

CpuIsa detect_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma"))
    return CpuIsa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
#endif
  return CpuIsa::baseline;
}

}  // namespace

CpuIsa cpu_isa() {
  static const CpuIsa isa = detect_isa();
  return isa;
}

const char* name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx2: return "avx2";
    default: return "baseline";
  }
}

int cpu_kernel_threads() {
  static const int n = [] {
    const char* env = std::getenv("HL_NUM_THREADS");
    int v = env ? std::atoi(env) : int(std::thread::hardware_concurrency());
    return std::max(1, v);
  }();
  return n;
}

}  // namespace kiln
