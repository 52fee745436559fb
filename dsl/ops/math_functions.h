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

}  // namespace kiln
