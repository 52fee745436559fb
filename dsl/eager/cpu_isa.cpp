#include "dsl/eager/cpu_isa.h"
#include "dsl/settings.h"

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
    int cores = std::max(1, int(std::thread::hardware_concurrency()));
    return int(int_setting("HL_NUM_THREADS", cores, 1, 1 << 16));
  }();
  return n;
}

}  // namespace kiln
