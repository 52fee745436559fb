// Gradients of pointwise Halide definitions from Halide's own automatic differentiation
// (propagate_adjoints): what a Halide op registered without a derivative rule
// (graph/halide_op.h) differentiates with. For y = f(x_0, ..., x_n-1), element by element,
//
//   Expr dx_i = pointwise_adjoint(f, {x_0, ..., x_n-1}, dy, i, attrs, "myns::op");
//
// is dy * df/dx_i as one Expr of the same values: the derivative of a pointwise op is pointwise,
// so its backward fuses into compiled regions like any other pointwise op.
//
// For an op over whole tensors (its output's Func from its inputs' Funcs), the same from the Funcs:
//
//   Func dx_i = tensor_adjoint(y, dy, x_i, "myns::op");
//
// Where Halide can invert a read (x(i - 1) read at i) the adjoint gathers; where it cannot (a
// clamped edge, a reduction's many readers of one element) it scatters, through Funcs with update
// definitions that the schedule computes whole (schedules/: the custom schedule class).
#pragma once
#include <string_view>

#include "dsl/halide_def.h"

namespace kiln {

// kiln::Error naming `op` when f's value or x_i is not floating point, or when Halide's
// derivative is not one pointwise expression of the element's values (it reads another element).
// An input f does not read gets a zero gradient.
Halide::Expr pointwise_adjoint(const PointwiseDef& f, const std::vector<Halide::Expr>& values,
                               const Halide::Expr& grad, int input, const Attrs& attrs, std::string_view op);

// d loss / d input as a Func over input's dims, given y = out.func over out.shape and dy = grad.func
// (same dims); a zero Func where y does not read input. kiln::Error naming `op` when y or input is
// not floating point.
Halide::Func tensor_adjoint(const HalideTensor& out, const HalideTensor& grad, const HalideTensor& input,
                            std::string_view op);

}  // namespace kiln
