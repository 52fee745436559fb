// The matrix-product functions: matmul, and linear (x W^T + b) built from matmul and add so that
// autograd and graph capture see the ops they already know.
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b) {
  static const OpDef& d = op_def("matmul");
  return dispatch(d, {a, b})[0];
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(x.defined() && weight.defined(), "linear: x and weight must be defined tensors");
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
