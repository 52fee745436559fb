// The math of compiled CUDA pipelines: what the halide backend (and the tests that lower regions
// for CUDA as it does) rewrites in a region's Funcs before scheduling.
#pragma once
#include <Halide.h>

#include <vector>

namespace kiln {

// For compiled pipelines on CUDA: f32 exp(x) as PTX's ex2.approx of x * log2(e), two instructions
// where libdevice's accurate expf takes about fifteen (the f32 exp of Triton's kernels, which
// torch.compile emits, is the same). Relative error: about 2 ulp of ex2, plus x * log2(e)'s
// rounding, up to 3e-6 for |x| near 88 (where exp under- or overflows); results below 2^-126
// flush to 0. GPT-2's masked attention softmax issued more instructions than its 805 MB take to
// move (67 a score, 30 of them two expfs). A lowering pass: it rewrites the kernels' code
// only, as libdevice's exp2f (ex2.approx.ftz under Halide's flush-to-zero flag), so that what
// Halide leaves on the host keeps the C library's exp. (Rewritten in the Funcs' definitions, a
// constant exp(0) that Halide hoisted out of a kernel called __nv_exp2f on the host, and the
// library failed to load: CUDA fuzz seed 1009; named as the NVVM intrinsic, LLVM aborted.)
//
// The pipeline of a CUDA region's outputs: C-library math renamed to libdevice's
// (math_functions.h: use_libdevice_math), and the kernels' f32 exp as above.
Halide::Pipeline cuda_pipeline(const std::vector<Halide::Func>& outputs);

}  // namespace kiln
