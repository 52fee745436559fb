// The fused attention kernel's interface, shared by its front (dsl/eager/attention.cpp) and its
// instruction-set builds (dsl/eigen_gemm/attention_impl.cpp). Plain structs only: the builds are
// compiled with other flags and must share no inline code with the rest of kiln.
//
// For each (batch, head), with S = scale * q k^T and its entries above the diagonal masked out
// when `causal` (key j is seen by query i when j <= i, counted from the top left, as PyTorch's
// is_causal):
//   forward:  out = softmax(S) v,  lse = logsumexp(S) per query row
//   backward: P = exp(S - lse); dv = P^T dout; dS = P * (dout v^T - rowsum(dout * out)) * scale;
//             dq = dS k; dk = dS^T q
// Queries go in blocks of kAttentionBlock rows, so a block's scores stay in the core's cache, and a
// causal block stops at its last row's key.
#pragma once
#include <cstdint>

namespace kiln {

// Measured on the 2-core AVX-512 build machine, [4, 8, 256, 64] causal, forward / backward ms:
// 16 rows 1.57-1.75 / 3.34-3.51, 32 rows 1.51-1.63 / 3.01-3.19, 48 rows 1.45-1.65 / 3.00-3.19,
// 64 rows 1.53-1.57 / 3.55-3.64, 128 rows 1.72-1.76 / 5.15-5.22.
constexpr int64_t kAttentionBlock = 32;

// Element strides of a [batch, heads, rows, cols] operand; its columns are dense (stride 1). The
// log-sum-exp [batch, heads, rows] uses batch, head and row.
struct AttentionLayout {
  int64_t batch = 0, head = 0, row = 0;
};

struct AttentionProblem {
  int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
  double scale = 1;
  bool causal = false;
};

// Element pointers (float or double, as the problem's dtype) and layouts. The forward reads q, k,
// v and writes out, lse; the backward reads q, k, v, out, lse, grad_out and writes grad_q, grad_k,
// grad_v.
struct AttentionOperands {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *grad_out = nullptr;
  void *out = nullptr, *lse = nullptr, *grad_q = nullptr, *grad_k = nullptr, *grad_v = nullptr;
  AttentionLayout q_at, k_at, v_at, out_at, lse_at, grad_out_at, grad_q_at, grad_k_at, grad_v_at;
};

}  // namespace kiln
