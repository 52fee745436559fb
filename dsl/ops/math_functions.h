// Math functions as Halide expressions that vectorize on the CPU. Halide 14 lowers sin, cos and
// tanh to one C-library call per lane there (about 10x slower than the rest of a pointwise
// kernel) and has no erf, so the op definitions use these instead. Accuracy: a few ulp of
// f32, and about 1e-15 relative for f64 over the ranges models see (|x| < 1e5 for sin/cos).
#pragma once
#include <Halide.h>

#include <string>
#include <vector>

namespace kiln {

Halide::Expr erf_expr(Halide::Expr x);
Halide::Expr tanh_expr(Halide::Expr x);
Halide::Expr sin_expr(Halide::Expr x);
Halide::Expr cos_expr(Halide::Expr x);
// gelu(x) = x (1 + erf(x / sqrt 2)) / 2, or with approximate == "tanh" GPT-2's form
// x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2; and its derivative. Written once: gelu,
// gelu_backward and the GEMMs with a GELU epilogue (dsl/ops/matmul.cpp) use these.
Halide::Expr gelu_expr(Halide::Expr x, const std::string& approximate);
Halide::Expr gelu_grad_expr(Halide::Expr x, const std::string& approximate);

// For code compiled to CUDA: the C-library calls these functions make (f64 erf) renamed to
// their libdevice equivalents (__nv_erf), in the definitions of `outputs` and of every Func they
// call. An unresolved C-library name makes the driver reject the PTX (CUDA_ERROR_INVALID_PTX).
void use_libdevice_math(const std::vector<Halide::Func>& outputs);

// For compiled pipelines on CUDA: f32 exp(x) as PTX's ex2.approx of x * log2(e), two instructions
// where libdevice's accurate expf takes about fifteen (the f32 exp of Triton's kernels, which
// torch.compile emits, is the same). Relative error: about 2 ulp of ex2, plus x * log2(e)'s
// rounding, up to 3e-6 for |x| near 88 (where exp under- or overflows); results below 2^-126
// flush to 0. GPT-2's masked attention softmax issued more instructions than its 805 MB take to
// move (67 a score, 30 of them two expfs). Called as libdevice's exp2f (ex2.approx.ftz under
// Halide's flush-to-zero flag): named as the NVVM intrinsic, a stage of the pipeline computed on
// the host made LLVM abort the process (no x86 instruction for it; CUDA fuzz seed 1009). Such a
// stage now fails to load with an error naming __nv_exp2f: exp on a host stage is an open bug.
void use_fast_exp(const std::vector<Halide::Func>& outputs);

}  // namespace kiln
