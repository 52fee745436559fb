// embedding: a gather of rows. weight (V, D) of any dtype, indices of any shape with dtype i32 or
// i64 -> indices.shape + (D). Indices must lie in [0, V); the eager runner checks them on the host
// before the kernel runs (CUDA indices only with KILN_CHECK_INDICES=1: the CUDA kernel clamps, as
// the Halide definition does, so a bad index can never read outside).
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/runtime_attrs.h"

namespace kiln {

namespace {

using namespace Halide;

std::vector<TensorMeta> infer_embedding(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& weight = in[0];
  const TensorMeta& indices = in[1];
  Device dev = common_device("embedding", in);
  KILN_CHECK(weight.shape.size() == 2, "embedding: weight must be 2-D (num_embeddings, dim), got shape ",
             to_string(weight.shape));
  KILN_CHECK(indices.dtype == DType::i32 || indices.dtype == DType::i64,
             "embedding: indices must have dtype i32 or i64, got ", indices.dtype, " (shape ",
             to_string(indices.shape), ")");
  Shape out = indices.shape;
  out.push_back(weight.shape[1]);
  return {{out, weight.dtype, dev}};
}

std::vector<HalideTensor> define_embedding(const std::vector<HalideTensor>& in, const Attrs&) {
  const HalideTensor& weight = in[0];
  const HalideTensor& indices = in[1];
  std::vector<Var> v = halide_vars(indices.rank() + 1);
  std::vector<Expr> at(v.begin() + 1, v.end());
  Expr row = clamp(cast(Int(32), indices.func(at)), 0, weight.dim(0) - 1);
  Func out("embedding");
  out(v) = weight.func(v[0], row);
  std::vector<Expr> shape = indices.shape;
  shape.push_back(weight.dim(1));
  return {{out, shape, weight.dtype}};
}

// embedding_backward: the scatter-add of gradient rows into a (num_rows, D) table:
// grad (indices.shape + (D)), indices -> out (num_rows, D), out[idx[n]] += grad[n].
std::vector<TensorMeta> infer_embedding_backward(const std::vector<TensorMeta>& in, const Attrs& a) {
  const TensorMeta &grad = in[0], &indices = in[1];
  Device dev = common_device("embedding_backward", in);
  KILN_CHECK(indices.dtype == DType::i32 || indices.dtype == DType::i64,
             "embedding_backward: indices must have dtype i32 or i64, got ", indices.dtype);
  Shape want = indices.shape;
  KILN_CHECK(grad.shape.size() == want.size() + 1 &&
                 std::equal(want.begin(), want.end(), grad.shape.begin()),
             "embedding_backward: gradient of shape ", to_string(grad.shape), " does not match indices of shape ",
             to_string(indices.shape), " plus one row dim");
  int64_t rows = a.get<int64_t>("num_rows");
  KILN_CHECK(rows >= 0, "embedding_backward: num_rows must be >= 0, got ", rows);
  return {{{rows, grad.shape.back()}, grad.dtype, dev}};
}

std::vector<HalideTensor> define_embedding_backward(const std::vector<HalideTensor>& in, const Attrs& a) {
  const HalideTensor &grad = in[0], &indices = in[1];
  Expr rows = cast(Int(32), attr_expr(a, "num_rows"));
  Region bounds;
  for (int d = indices.rank(); d-- > 0;) bounds.push_back(Range(0, indices.shape[d]));  // innermost first
  RDom r(bounds);
  std::vector<Expr> at;
  for (int i = 0; i < indices.rank(); ++i) at.push_back(r[i]);
  Var d("d"), v("v");
  Func out("embedding_backward");
  out(d, v) = Internal::make_zero(halide_type(grad.dtype));
  std::vector<Expr> g_at{d};
  g_at.insert(g_at.end(), at.begin(), at.end());
  Expr row = clamp(cast(Int(32), indices.func(at)), 0, rows - 1);
  out(d, row) += grad.func(g_at);
  return {{out, {rows, grad.dim(-1)}, grad.dtype}};
}

}  // namespace

void KILN_OP_TABLES::add_embedding_ops(std::vector<OpDef>& defs) {
  OpDef b;
  b.name = "embedding_backward";
  b.schedule_class = ScheduleClass::scatter;
  b.family = KernelFamily::embedding_backward;
  b.host_checked = true;
  b.num_inputs = 2;
  b.infer = infer_embedding_backward;
  b.define = KILN_HALIDE(define_embedding_backward);
  b.differentiable = false;  // runs inside a backward only
  defs.push_back(std::move(b));

  OpDef d;
  d.name = "embedding";
  d.schedule_class = ScheduleClass::gather;
  d.family = KernelFamily::embedding;
  d.host_checked = true;
  d.num_inputs = 2;
  d.infer = infer_embedding;
  d.define = KILN_HALIDE(define_embedding);
  defs.push_back(std::move(d));
}

}  // namespace kiln
