// attention, attention_backward: scaled dot-product attention as one op and its gradient, run by a
// fused CPU kernel (dsl/eager/attention.cpp; the formulas are in dsl/eager/attention_kernel.h), on
// CUDA in f32 by cuBLAS GEMMs around one probabilities kernel (dsl/eager/attention_cuda.cpp), and
// in bf16 and f16 by cuDNN's fused flash attention (dsl/eager/attention_cudnn.cpp).
// Users reach it through scaled_dot_product_attention(); the compiler puts it in place of the
// matmul-softmax-matmul it finds in a graph where a kernel exists (graph/fuse_attention.cpp). It has no Halide
// definition, so compiled graphs run it as an eager step, like a GEMM.
//   attention(q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv], scale, causal)
//     -> out [B, H, Tq, Dv], lse [B, H, Tq] (the log-sum-exp of each row of scaled scores; f32
//        for bf16 and f16 operands)
//     with merged_heads (an optional attribute, graph/attention_layout.cpp sets it): out comes as
//     [B, Tq, H, Dv], the order in which a reshape merges the heads into [B, Tq, H * Dv] without
//     a copy; the kernels write it so
//   attention_backward(q, k, v, out, grad_out, lse, scale, causal) -> grad_q, grad_k, grad_v
//     (out and grad_out [B, H, Tq, Dv], in any strides)
#include "dsl/ops/op_tables.h"

#include "dsl/error.h"

namespace kiln {

namespace {

// Each row's log-sum-exp is kept in f32 for 16-bit operands (cuDNN's statistics), else in q's dtype.
DType lse_dtype(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

void check_operands(const std::string& op, const std::vector<TensorMeta>& in) {
  const char* names[] = {"q", "k", "v", "out", "grad_out", "lse"};
  common_device(op, in);
  const DType t = in[0].dtype;
  const bool on_cuda = in[0].device.is_cuda();
  KILN_CHECK(t == DType::f32 || (on_cuda ? t == DType::bf16 || t == DType::f16 : t == DType::f64), op,
             ": no kernel for ", t, " on ", in[0].device, " (", on_cuda ? "f32, bf16 and f16" : "f32 and f64",
             " there); scaled_dot_product_attention writes other dtypes out with matmul and softmax");
  for (size_t i = 0; i < in.size(); ++i) {
    size_t rank = i == 5 ? 3 : 4;
    KILN_CHECK(in[i].shape.size() == rank, op, ": ", names[i], " must have ", rank, " dims (",
               rank == 4 ? "batch, heads, rows, features" : "batch, heads, rows", "), got shape ",
               to_string(in[i].shape));
    DType want = i == 5 ? lse_dtype(in[0].dtype) : in[0].dtype;
    KILN_CHECK(in[i].dtype == want, op, ": q, k, v, out and grad_out must share one dtype and lse be ",
               lse_dtype(in[0].dtype), " with it, got ", in[0].dtype, " (q) and ", in[i].dtype, " (", names[i], ")");
  }
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  KILN_CHECK(k[0] == q[0] && v[0] == q[0] && k[1] == q[1] && v[1] == q[1], op,
             ": q, k and v must have the same batch and head dims, got shapes ", to_string(q), ", ", to_string(k),
             " and ", to_string(v));
  KILN_CHECK(k[3] == q[3], op, ": q and k must have the same feature dim, got shapes ", to_string(q), " and ",
             to_string(k));
  KILN_CHECK(v[2] == k[2] && k[2] > 0, op, ": k and v must have the same number of rows (at least 1), got shapes ",
             to_string(k), " and ", to_string(v));
  if (in.size() == 6) {
    Shape out{q[0], q[1], q[2], v[3]};
    KILN_CHECK(in[3].shape == out && in[4].shape == out && in[5].shape == Shape(out.begin(), out.end() - 1), op,
               ": out and grad_out must have shape ", to_string(out), " and lse ",
               to_string(Shape(out.begin(), out.end() - 1)), ", got ", to_string(in[3].shape), ", ",
               to_string(in[4].shape), " and ", to_string(in[5].shape));
  }
}

std::vector<TensorMeta> infer_attention(const std::vector<TensorMeta>& in, const Attrs& a) {
  check_operands("attention", in);
  const Shape &q = in[0].shape, &v = in[2].shape;
  Shape out = a.get_or<bool>("merged_heads", false) ? Shape{q[0], q[2], q[1], v[3]} : Shape{q[0], q[1], q[2], v[3]};
  return {{out, in[0].dtype, in[0].device},
          {{q[0], q[1], q[2]}, lse_dtype(in[0].dtype), in[0].device}};
}

std::vector<TensorMeta> infer_attention_backward(const std::vector<TensorMeta>& in, const Attrs&) {
  check_operands("attention_backward", in);
  return {in[0], in[1], in[2]};
}

OpDef attention_op(const std::string& name, int inputs, ShapeRule infer) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::matmul;  // an eager kernel, never recomputed (graph/partition.cpp)
  d.family = KernelFamily::attention;
  d.num_inputs = inputs;
  d.infer = std::move(infer);
  return d;
}

}  // namespace

void KILN_OP_TABLES::add_attention_ops(std::vector<OpDef>& defs) {
  defs.push_back(attention_op("attention", 3, infer_attention));
  OpDef backward = attention_op("attention_backward", 6, infer_attention_backward);
  backward.differentiable = false;  // runs inside a backward only
  defs.push_back(std::move(backward));
}

}  // namespace kiln
