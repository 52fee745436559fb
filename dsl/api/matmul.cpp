// The matrix-product functions: matmul, and linear (x W^T + b) built from matmul and add so that
// autograd and graph capture see the ops they already know.
#include "dsl/autocast.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b) {
  static const OpDef& d = op_def("matmul");
  return dispatch(d, {a, b})[0];
}

// Under autocast linear is in the lower-precision list as a whole, as in PyTorch: the bias is cast
// too, so that the output stays 16-bit rather than promote to f32 at the add.
Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  KILN_CHECK(x_in.defined() && weight_in.defined(), "linear: x and weight must be defined tensors");
  Tensor x = autocast_lower(x_in), weight = autocast_lower(weight_in);
  Tensor bias = bias_in.defined() ? autocast_lower(bias_in) : bias_in;
  // Checks only: impl() reads do not specialize the sizes of a traced x.
  const Shape& xs = x.impl().shape;
  const Shape& ws = weight.impl().shape;
  KILN_CHECK(ws.size() == 2, "linear: weight must be 2-D (out_features, in_features), got shape ",
             to_string(ws));
  KILN_CHECK(!xs.empty(), "linear: x needs at least 1 dim (..., in_features), got shape ", to_string(xs));
  KILN_CHECK(xs.back() == ws[1], "linear: inner dims must match: ", xs.back(), " vs ", ws[1], " (x shape ",
             to_string(xs), ", weight shape ", to_string(ws), "; the last dim of x must equal weight's "
             "in_features, dim 1 of weight (out_features, in_features))");
  KILN_CHECK(x.dtype() == weight.dtype() && is_floating(x.dtype()), "linear: x and weight must have the "
             "same floating dtype, got ", x.dtype(), " and ", weight.dtype(), " (x shape ", to_string(xs),
             ", weight shape ", to_string(ws), ")");
  if (bias.defined()) {
    KILN_CHECK(bias.impl().shape == Shape{ws[0]}, "linear: bias must have shape ", to_string(Shape{ws[0]}),
               " (out_features), got ", to_string(bias.impl().shape), " (weight shape ", to_string(ws), ")");
    KILN_CHECK(bias.dtype() == x.dtype(), "linear: bias dtype ", bias.dtype(), " differs from x dtype ",
               x.dtype());
  }
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? add(y, bias) : y;
}

}  // namespace kiln
