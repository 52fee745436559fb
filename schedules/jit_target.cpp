#include "schedules/jit_target.h"

namespace kiln {

const Halide::Target& jit_target() {
  static const Halide::Target target = [] {
    Halide::Target t = Halide::get_jit_target_from_environment();
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512fp16")) t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
#endif
    return t;
  }();
  return target;
}

}  // namespace kiln
