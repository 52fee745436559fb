// Eager runner of the fused attention ops (dsl/ops/attention.cpp): picks the instruction-set
// build of the kernel (dsl/eigen_gemm/attention_impl.cpp) for this CPU and splits the (batch,
// head) pairs into one contiguous range per thread of Halide's pool. Operands may be any strided
// views (q, k, v straight out of a fused qkv projection) as long as their last dim is dense;
// others are copied dense first.
#include <HalideRuntime.h>

#include <algorithm>

#include "dsl/dispatch.h"
#include "dsl/eager/attention_kernel.h"
#include "dsl/eager/cpu_isa.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"

namespace kiln {

namespace attention_detail {
#define KILN_DECLARE_ATTENTION(isa)                                                                          \
  void forward_f32_##isa(const AttentionProblem&, const AttentionOperands&, int64_t, int64_t);               \
  void backward_f32_##isa(const AttentionProblem&, const AttentionOperands&, int64_t, int64_t);              \
  void forward_f64_##isa(const AttentionProblem&, const AttentionOperands&, int64_t, int64_t);               \
  void backward_f64_##isa(const AttentionProblem&, const AttentionOperands&, int64_t, int64_t);
KILN_DECLARE_ATTENTION(baseline)
#if defined(__x86_64__)
KILN_DECLARE_ATTENTION(avx2)
KILN_DECLARE_ATTENTION(avx512)
#endif
#undef KILN_DECLARE_ATTENTION
}  // namespace attention_detail

namespace {

using namespace attention_detail;
using HeadsFn = void (*)(const AttentionProblem&, const AttentionOperands&, int64_t, int64_t);

HeadsFn kernel_for_cpu(bool backward, DType dtype) {
  const bool f32 = dtype == DType::f32;
  switch (cpu_isa()) {
#if defined(__x86_64__)
    case CpuIsa::avx512:
      return backward ? (f32 ? &backward_f32_avx512 : &backward_f64_avx512) : (f32 ? &forward_f32_avx512 : &forward_f64_avx512);
    case CpuIsa::avx2:
      return backward ? (f32 ? &backward_f32_avx2 : &backward_f64_avx2) : (f32 ? &forward_f32_avx2 : &forward_f64_avx2);
#endif
    default:
      return backward ? (f32 ? &backward_f32_baseline : &backward_f64_baseline)
                      : (f32 ? &forward_f32_baseline : &forward_f64_baseline);
  }
}

struct Work {
  AttentionProblem problem;
  AttentionOperands operands;
  HeadsFn fn;
  int64_t pairs;
  int tasks;
};

int run_task(void*, int i, uint8_t* closure) {
  const Work& w = *reinterpret_cast<const Work*>(closure);
  try {
    w.fn(w.problem, w.operands, w.pairs * i / w.tasks, w.pairs * (i + 1) / w.tasks);
  } catch (...) {
    return -1;  // allocation failure of a block's scratch matrices
  }
  return 0;
}

// x with a dense last dim (a copy only when it is not).
Tensor dense_rows(const Tensor& x) { return x.stride(-1) == 1 || x.size(-1) == 1 ? x : x.contiguous(); }

// [batch, heads, rows, cols] with dense cols, or the log-sum-exp's [batch, heads, rows].
AttentionLayout layout(const Tensor& x) { return {x.stride(0), x.stride(1), x.stride(2)}; }

}  // namespace

TensorList run_attention(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  def.infer(metas_of(inputs), attrs);  // raises on bad shapes and dtypes
  if (inputs[0].device().is_cuda()) return run_attention_cuda(def, inputs, attrs);
  KILN_CHECK(inputs[0].device().is_cpu(), def.name, ": no kernel for tensors on ", inputs[0].device());
  const bool backward = def.name == "attention_backward";
  TensorList in;
  for (const Tensor& x : inputs) in.push_back(dense_rows(x));
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  TensorOptions opts{q.dtype(), q.device()};
  Work w;
  w.problem = {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3),
               attrs.get<double>("scale"), attrs.get<bool>("causal")};
  AttentionOperands& o = w.operands;
  o.q = q.data_ptr(), o.k = k.data_ptr(), o.v = v.data_ptr();
  o.q_at = layout(q), o.k_at = layout(k), o.v_at = layout(v);
  TensorList outs;
  if (!backward) {
    // With merged_heads, out is [B, Tq, H, Dv]: the kernel writes it through its [B, H, Tq, Dv] view.
    const bool merged = attrs.get_or<bool>("merged_heads", false);
    outs = {Tensor::empty(merged ? Shape{q.size(0), q.size(2), q.size(1), v.size(3)}
                                 : Shape{q.size(0), q.size(1), q.size(2), v.size(3)}, opts),
            Tensor::empty(Shape{q.size(0), q.size(1), q.size(2)}, opts)};
    o.out = outs[0].data_ptr(), o.lse = outs[1].data_ptr();
    o.out_at = layout(merged ? outs[0].transpose(1, 2) : outs[0]), o.lse_at = layout(outs[1]);
  } else {
    const Tensor &out = in[3], &grad_out = in[4], &lse = in[5];
    o.out = out.data_ptr(), o.grad_out = grad_out.data_ptr(), o.lse = lse.data_ptr();
    o.out_at = layout(out), o.grad_out_at = layout(grad_out), o.lse_at = layout(lse);
    outs = {Tensor::empty(q.shape(), opts), Tensor::empty(k.shape(), opts), Tensor::empty(v.shape(), opts)};
    o.grad_q = outs[0].data_ptr(), o.grad_k = outs[1].data_ptr(), o.grad_v = outs[2].data_ptr();
    o.grad_q_at = layout(outs[0]), o.grad_k_at = layout(outs[1]), o.grad_v_at = layout(outs[2]);
  }
  w.fn = kernel_for_cpu(backward, q.dtype());
  w.pairs = w.problem.batch * w.problem.heads;
  w.tasks = int(std::min<int64_t>(w.pairs, cpu_kernel_threads()));
  if (w.tasks <= 1) {
    if (w.pairs > 0) w.fn(w.problem, w.operands, 0, w.pairs);
  } else {
    int rc = halide_do_par_for(nullptr, &run_task, 0, w.tasks, reinterpret_cast<uint8_t*>(&w));
    KILN_CHECK(rc == 0, def.name, ": a kernel task failed (out of memory for its scratch blocks?)");
  }
  return outs;
}

}  // namespace kiln
