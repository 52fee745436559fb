// The unary pointwise ops without attributes, one line each: everything kiln knows about the op.
//
//   X(name, result, cheap, definition, derivative)
//     result      same: integer inputs stay integers; floating: they compute in f32
//     cheap       a few instructions: a fused region recomputes it rather than store it
//     definition  the value as a Halide Expr of `x` (helpers: dsl/ops/math_functions.h)
//     derivative  the input's gradient as Tensor code of `x` (the input), `y` (the output) and
//                 `g` (the output's gradient)
//
// The list is expanded by dsl/ops/unary.cpp (the op's definition), dsl/api/pointwise.cpp (the
// function `Tensor name(const Tensor& x)`) and autograd/derivatives.cpp (its derivative rule); the
// build declares the functions from the names alone (cmake/unary_functions.cmake), so a change to
// one line recompiles those three files and regenerates that op's kernels only. Adding such an op
// takes this line, its kernel line in generators/kernels/pointwise.cmake and its entry in
// tests/support/op_db.cpp, which gives it eager, gradcheck, CUDA and compile tests. Ops with
// attributes (gelu) have their own entries.
#pragma once

#define KILN_UNARY_OPS(X)                                                                              \
  X(neg, same, true, -x, -g)                                                                           \
  X(abs, same, true, Halide::cast(x.type(), Halide::abs(x)), g * (mask(gt(x, 0.0), x) - mask(lt(x, 0.0), x))) \
  X(square, same, false, x * x, g * x * 2.0)                                                           \
  X(relu, same, false, Halide::max(x, Halide::Internal::make_zero(x.type())), where(gt(x, 0.0), g, 0.0)) \
  X(exp, floating, false, Halide::exp(x), g * y)                                                       \
  X(log, floating, false, Halide::log(x), g / x)                                                       \
  X(sqrt, floating, false, Halide::sqrt(x), g * 0.5 / y)                                               \
  X(rsqrt, floating, false, one(x) / Halide::sqrt(x), g * -0.5 * y * y * y)                            \
  X(sin, floating, false, sin_expr(x), g * cos(x))                                                     \
  X(cos, floating, false, cos_expr(x), -g * sin(x))                                                    \
  X(tanh, floating, false, tanh_expr(x), g * (1.0 - square(y)))                                        \
  X(sigmoid, floating, false, sigmoid_expr(x), g * y * (1.0 - y))                                      \
  X(silu, floating, false, x * sigmoid_expr(x), g * sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x))))      \
  X(reciprocal, floating, false, one(x) / x, -g * square(y))                                           \
  X(erf, floating, false, erf_expr(x), g * 1.1283791670955126 * exp(-square(x))) /* 2 / sqrt(pi) */    \
  /* log(1 + e^x), written so that large |x| neither overflows nor loses x */                         \
  X(softplus, floating, false,                                                                         \
    Halide::max(x, Halide::Internal::make_zero(x.type())) + Halide::log(one(x) + Halide::exp(-Halide::abs(x))), \
    g * sigmoid(x))
