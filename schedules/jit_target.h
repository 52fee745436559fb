// The target kiln JIT-compiles for: the host, as Halide detects it, without features whose
// detection is not safe. Halide 14 reports avx512_sapphirerapids on AMD Zen 4, which lacks
// AVX512-FP16, and LLVM then emits FP16 instructions that fault (SIGILL) on f16 code.
#pragma once
#include <Halide.h>

namespace kiln {

const Halide::Target& jit_target();

}  // namespace kiln
