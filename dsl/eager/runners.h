// The eager runners, one per kernel family: each turns tensors into the family's canonical
// kernel form, picks the kernel by op, variant and dtype, and calls it.
#pragma once
#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

using EagerRunner = TensorList (*)(const OpDef&, const TensorList&, const Attrs&);
EagerRunner eager_runner(KernelFamily family);

TensorList run_pointwise(const OpDef&, const TensorList&, const Attrs&);
TensorList run_cast(const OpDef&, const TensorList&, const Attrs&);
TensorList run_copy(const OpDef&, const TensorList&, const Attrs&);
TensorList run_view(const OpDef&, const TensorList&, const Attrs&);
TensorList run_reduce(const OpDef&, const TensorList&, const Attrs&);
TensorList run_rows(const OpDef&, const TensorList&, const Attrs&);
TensorList run_layer_norm(const OpDef&, const TensorList&, const Attrs&);
TensorList run_cross_entropy(const OpDef&, const TensorList&, const Attrs&);
TensorList run_matmul(const OpDef&, const TensorList&, const Attrs&);
TensorList run_embedding_backward(const OpDef&, const TensorList&, const Attrs&);
TensorList run_embedding(const OpDef&, const TensorList&, const Attrs&);
TensorList run_cat(const OpDef&, const TensorList&, const Attrs&);
TensorList run_creation(const OpDef&, const TensorList&, const Attrs&);
TensorList run_attention(const OpDef&, const TensorList&, const Attrs&);  // both attention ops
TensorList run_attention_cuda(const OpDef&, const TensorList&, const Attrs&);  // their CUDA half
TensorList run_custom(const OpDef&, const TensorList&, const Attrs&);  // dsl/custom_op.cpp

// Shared by runners: the input converted to `t` (no copy when it already has that dtype).
Tensor convert(const Tensor& x, DType t);
// A view of x broadcast to `shape` (stride 0 on broadcast dims).
Tensor broadcast_to_view(const Tensor& x, const Shape& shape);
// The dtype a kernel exists for: `t` itself, else its f32 / i32 stand-in (f16, bf16 -> f32,
// bool -> i32), or `t` again when neither exists (the caller's require_kernel then errors).
DType kernel_dtype(const std::string& prefix, DType t);
// The dtype whose kernels move raw bits of t's element size (bool 1 byte, f16 2, i32 4, i64 8).
DType copy_carrier(DType t);
// Copies src into the (possibly strided) view dst of the same shape and dtype.
void copy_into(const Tensor& dst, const Tensor& src);

}  // namespace kiln
