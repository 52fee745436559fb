// The neural-network op functions: softmax, log_softmax, layer_norm, cross_entropy,
// scaled_dot_product_attention.
#include <cmath>

#include "dsl/creation.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

Tensor softmax(const Tensor& x, int64_t dim) { return dispatch(op_def("softmax"), {x}, {{"dim", dim}})[0]; }

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch(op_def("log_softmax"), {x}, {{"dim", dim}})[0];
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  Attrs a{{"normalized_shape", normalized_shape}, {"eps", eps}};
  if (!weight.defined() && !bias.defined()) return dispatch(op_def("layer_norm"), {x}, a)[0];
  // The op takes weight and bias together; a missing one is the identity.
  const Tensor& given = weight.defined() ? weight : bias;
  TensorOptions opts = given.options();
  Tensor w = weight.defined() ? weight : ones(normalized_shape, opts);
  Tensor b = bias.defined() ? bias : zeros(normalized_shape, opts);
  return dispatch(op_def("layer_norm"), {x, w, b}, a)[0];
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return dispatch(op_def("cross_entropy"), {logits, targets})[0];
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  KILN_CHECK(q.dim() == 4, "scaled_dot_product_attention: q must have 4 dims (batch, heads, rows, features), got "
             "shape ", to_string(q.shape()));
  if (scale == 0) scale = 1.0 / std::sqrt(double(q.size(3)));
  return dispatch(op_def("attention"), {q, k, v}, {{"scale", scale}, {"causal", causal}})[0];
}

}  // namespace kiln
