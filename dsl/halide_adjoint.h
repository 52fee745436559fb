// Gradients of pointwise Halide definitions from Halide's own automatic differentiation
// (propagate_adjoints): what a Halide op registered without a derivative rule
// (graph/halide_op.h) differentiates with. For y = f(x_0, ..., x_n-1), element by element,
//
//   Expr dx_i = pointwise_adjoint(f, {x_0, ..., x_n-1}, dy, i, attrs, "myns::op");
//
// is dy * df/dx_i as one Expr of the same values: the derivative of a pointwise op is pointwise,
// so its backward fuses into compiled regions like any other pointwise op.
#pragma once
#include <string_view>

#include "dsl/halide_def.h"

namespace kiln {

// kiln::Error naming `op` when f's value or x_i is not floating point, or when Halide's
// derivative is not one pointwise expression of the element's values (it reads another element).
// An input f does not read gets a zero gradient.
Halide::Expr pointwise_adjoint(const PointwiseDef& f, const std::vector<Halide::Expr>& values,
                               const Halide::Expr& grad, int input, const Attrs& attrs, std::string_view op);

}  // namespace kiln
