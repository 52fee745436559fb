// The neural-network op functions: softmax, log_softmax, layer_norm, cross_entropy,
// scaled_dot_product_attention.
#include <cmath>

#include "dsl/autocast.h"
#include "dsl/creation.h"
#include "dsl/dispatch.h"
#include "dsl/eager/attention_cudnn.h"
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

namespace {

// Attention written out with matmul, where and softmax. A traced call records this, so that the
// compiler fuses the scale, the mask and the softmax into its own pipelines (CUDA) or puts the
// fused op back in its place (graph/fuse_attention.cpp matches exactly this chain); eagerly it
// serves the dtypes and devices the fused op has no kernel for.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) {  // key j is seen by query i when j <= i (from the top left, as PyTorch's is_causal)
    TensorOptions idx{.dtype = DType::i64, .device = q.device()};
    Tensor rows = arange(0, double(q.size(2)), 1, idx), cols = arange(0, double(k.size(2)), 1, idx);
    scores = where(ge(rows.unsqueeze(1), cols.unsqueeze(0)), scores, -INFINITY);
  }
  return matmul(softmax(scores, -1), v);
}

}  // namespace

bool fused_attention_supported(DType t, const Device& device, int64_t head_dim, int64_t value_dim) {
  if (device.is_cpu()) return t == DType::f32 || t == DType::f64;
  if (!device.is_cuda()) return false;
  return t == DType::f32 || ((t == DType::bf16 || t == DType::f16) && cudnn_attention_supports(head_dim, value_dim));
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                                    double scale) {
  KILN_CHECK(q_in.dim() == 4, "scaled_dot_product_attention: q must have 4 dims (batch, heads, rows, features), "
             "got shape ", to_string(q_in.shape()));
  // Under autocast the whole attention is in the lower-precision list, as PyTorch's SDPA: q, k and
  // v are cast once, and the composite's softmax keeps 16-bit storage (it computes in f32 inside).
  Tensor q = autocast_lower(q_in), k = autocast_lower(k_in), v = autocast_lower(v_in);
  AutocastSuspended inside;
  if (scale == 0) scale = 1.0 / std::sqrt(double(q.size(3)));
  bool traced = q.is_traced() || k.is_traced() || v.is_traced();
  if (traced || !fused_attention_supported(q.dtype(), q.device(), q.size(3), v.size(3)))
    return attention_composite(q, k, v, causal, scale);
  return dispatch(op_def("attention"), {q, k, v}, {{"scale", scale}, {"causal", causal}})[0];
}

}  // namespace kiln
