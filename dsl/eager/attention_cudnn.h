// attention and attention_backward on CUDA in bf16 and f16: cuDNN's fused flash attention, built
// through its backend graph API (dsl/cuda/cudnn_graph.h) from the same operations the cuDNN
// frontend uses for scaled dot-product attention. No [B, H, Tq, Tk] tensor is written: the
// forward keeps each row's log-sum-exp (f32) and the backward recomputes the probabilities.
#pragma once
#include <string>
#include <vector>

#include "dsl/tensor.h"

namespace kiln {

// Whether cuDNN is loaded and runs attention with these head sizes (a multiple of 8, at most 128).
bool cudnn_attention_supports(int64_t head_dim, int64_t value_dim);

// One line per cached plan: pass, q's shape, mask, dtype and the engine configuration chosen.
std::vector<std::string> cudnn_attention_plans();

// out [B, H, Tq, Dv] (q's dtype; with merged_heads [B, Tq, H, Dv], written in that order), lse
// [B, H, Tq] (f32).
TensorList cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                   bool merged_heads = false);
// grad_q, grad_k, grad_v in q's dtype.
TensorList cudnn_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& grad_out, const Tensor& lse, double scale, bool causal);

}  // namespace kiln
