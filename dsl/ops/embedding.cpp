// embedding: a gather of rows. weight (V, D) of any dtype, indices of any shape with dtype i32 or
// i64 -> indices.shape + (D). Indices must lie in [0, V); the eager runner checks them on the host
// before the kernel runs (the Halide definition clamps so a bad index can never read outside).
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

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

}  // namespace

void add_embedding_ops(std::vector<OpDef>& defs) {
  OpDef d;
  d.name = "embedding";
  d.schedule_class = ScheduleClass::gather;
  d.family = KernelFamily::embedding;
  d.num_inputs = 2;
  d.infer = infer_embedding;
  d.define = define_embedding;
  defs.push_back(std::move(d));
}

}  // namespace kiln
