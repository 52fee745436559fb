// attention and attention_backward on CUDA. bf16 and f16 run cuDNN's fused flash attention
// (attention_cudnn.h), which never writes the [B, H, Tq, Tk] scores. f32 (cuDNN has no f32
// attention): the products are cuBLAS GEMMs (through matmul), the probabilities one kernel that
// fuses the scale, the causal mask and the softmax (kiln_attention_probs,
// generators/attention_kernels.cpp). The scores and probabilities live only inside the op: the
// tape keeps q, k, v, out and each row's log-sum-exp, and the backward recomputes the
// probabilities from them, as FlashAttention's backward does:
//   forward:  S = q k^T; P, lse = probs(S); out = P v
//   backward: P = exp(scale * S - lse), masked; dv = P^T dout; dP = dout v^T;
//             dS = softmax_backward(P, dP) = P * (dP - rowsum(dP * P));
//             dq = scale * dS k; dk = scale * dS^T q
// Against the same math written with matmul, mul, where and softmax (GPT-2 small's attention on
// one H200) this saves the passes of the scale and the mask, forward and backward, and the saved
// scores.
#include "dsl/cuda/cudnn_api.h"
#include "dsl/dispatch.h"
#include "dsl/eager/attention_cudnn.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

namespace {

// probs (and, without a given lse, each row's log-sum-exp) of the scores [B, H, Tq, Tk], all
// contiguous as matmul and Tensor::empty make them.
void run_probs(const Tensor& scores, const Tensor& lse, bool lse_given, const Tensor& probs, double scale, bool causal) {
  const std::string name = lse_given ? "kiln_attention_from_lse_f32" : "kiln_attention_probs_f32";
  KernelFn fn = require_kernel(name, "attention");
  int64_t keys = scores.size(-1), rows = scores.numel() / std::max<int64_t>(keys, 1);
  float scale_f = float(scale);
  int32_t queries = causal ? int32_t(scores.size(-2)) : 0;
  KernelBuffer s(scores, {keys, rows}, {1, keys}), l(lse, {rows}, {1}), p(probs, {keys, rows}, {1, keys});
  std::vector<void*> args{&s.buf};
  if (lse_given) args.push_back(&l.buf);
  args.push_back(&scale_f);
  args.push_back(&queries);
  args.push_back(&p.buf);
  if (!lse_given) args.push_back(&l.buf);
  call_kernel(fn, args, "attention");
}

}  // namespace

TensorList run_attention_cuda(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  const double scale = attrs.get<double>("scale");
  const bool causal = attrs.get<bool>("causal");
  const bool merged = attrs.get_or<bool>("merged_heads", false);  // out as [B, Tq, H, Dv]
  if (inputs[0].dtype() != DType::f32) {  // bf16, f16 (the shape rule allows no other)
    const int64_t d = inputs[0].size(3), dv = inputs[2].size(3);
    KILN_CHECK(cudnn_attention_supports(d, dv), def.name, ": ", inputs[0].dtype(),
               " on CUDA runs through cuDNN's fused attention, which needs head sizes that are multiples of 8 up "
               "to 128 (got ", d, " and ", dv, ")", cudnn_available() ? "" : " and cuDNN: " + cudnn_unavailable_reason());
    const TensorList& x = inputs;
    if (def.name == "attention") return cudnn_attention_forward(x[0], x[1], x[2], scale, causal, merged);
    return cudnn_attention_backward(x[0], x[1], x[2], x[3], x[4], x[5], scale, causal);
  }
  // Detached: the ops run here record nothing on the tape (the dispatcher records the attention op).
  const Tensor q = inputs[0].detach(), k = inputs[1].detach(), v = inputs[2].detach();
  TensorOptions opts{q.dtype(), q.device()};
  Tensor scores = matmul(q, k.transpose(-2, -1));
  Tensor probs = Tensor::empty(scores.shape(), opts);
  if (def.name == "attention") {
    Tensor lse = Tensor::empty(Shape{q.size(0), q.size(1), q.size(2)}, opts);
    if (probs.numel() > 0) run_probs(scores, lse, false, probs, scale, causal);
    scores = Tensor();  // freed before the second product
    Tensor out = matmul(probs, v);
    return {merged ? out.transpose(1, 2).contiguous() : out, lse};
  }
  // out (inputs[3]) is not read: softmax_backward's rowsum(dP * P) is FlashAttention's rowsum(dout * out).
  const Tensor grad_out = inputs[4].detach(), lse = inputs[5].detach().contiguous();
  if (probs.numel() > 0) run_probs(scores, lse, true, probs, scale, causal);
  scores = Tensor();
  Tensor grad_v = matmul(probs.transpose(-2, -1), grad_out);
  Tensor grad_probs = matmul(grad_out, v.transpose(-2, -1));
  Tensor grad_scores = dispatch(op_def("softmax_backward"), {probs, grad_probs}, {{"dim", int64_t(-1)}})[0];
  probs = grad_probs = Tensor();
  Tensor grad_q = matmul(grad_scores, k) * scale, grad_k = matmul(grad_scores.transpose(-2, -1), q) * scale;
  return {grad_q, grad_k, grad_v};
}

}  // namespace kiln
