// The eager kernels of the reduction ops and of the row-wise ops (softmax, log_softmax), built from
// each op's Halide definition called on the canonical 2-D form (kiln order [rows, row length]):
//   reduce: in [reduced (Halide dim 0), kept (dim 1)], any strides -> out [kept], dense;
//           the definition runs with dims = {1}; var takes its correction as a scalar input;
//   rows:   in (and grad, for the backward ops) and out [row (dim 0), rows (dim 1)], any strides;
//           the definition runs with dim = 1.
// The schedule (generators/row_schedule.h) specializes on the strides and sizes; the CUDA-only
// variant "columns" of sum and mean serves rows laid out across memory.
#include <optional>

#include "dsl/halide_def.h"
#include "dsl/ops/runtime_attrs.h"
#include "generators/kernel_params.h"
#include "generators/row_schedule.h"

namespace kiln {
namespace {

using namespace Halide;

class ReduceKernel : public Generator<ReduceKernel> {
 public:
  GeneratorParam<std::string> op{"op", ""};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};
  GeneratorParam<std::string> schedule{"schedule", ""};  // "columns": rows across memory, on CUDA

  void configure() {
    in_dtype_ = dtype_from_name(dtype.value());
    in_ = add_input<Buffer<>>("in", halide_type(in_dtype_), 2);
    if (op.value() == "var") correction_ = add_input<int64_t>("correction");
    out_dtype_ = op_def(op.value()).infer({{{1, 1}, in_dtype_, Device::cpu()}}, kernel_attrs())[0].dtype;
    out_ = add_output<Buffer<>>("out", halide_type(out_dtype_), 1);
  }

  void generate() {
    auto& in = *in_;
    in.dim(0).set_stride(Expr());
    HalideTensor x{Func(in), {in.dim(1).extent(), in.dim(0).extent()}, in_dtype_};
    std::optional<RuntimeAttr> correction;
    if (correction_) correction.emplace("correction", Expr(*correction_));
    HalideTensor y = op_def(op.value()).define({x}, kernel_attrs())[0];

    Var k("k");
    Func out = *out_;
    out(k) = y.func(k);

    RowLayout layout;
    layout.row = k;
    layout.rows = in.dim(1).extent();
    layout.length = in.dim(0).extent();
    layout.along_dense = in.dim(0).stride() == 1;
    layout.across_dense = in.dim(1).stride() == 1;
    layout.split_reductions = true;
    int bits = halide_type(in_dtype_).bits();
    if (op.value() == "sum") bits = std::max(bits, halide_type(out_dtype_).bits());
    layout.vector = natural_vector_size(bits > 32 ? Float(64) : Float(32));
    bool columns = schedule.value() == "columns";
    if (get_target().has_gpu_feature()) columns ? schedule_columns_gpu(out, layout) : schedule_rows_gpu(out, layout);
    else schedule_rows(out, layout);
  }

 private:
  Attrs kernel_attrs() const {
    Attrs a = parse_kernel_attrs(attrs);
    a.set("dims", std::vector<int64_t>{1});
    a.set("keepdim", false);
    if (op.value() == "var") a.set("correction", int64_t(1));  // replaced by the scalar input
    return a;
  }

  DType in_dtype_ = DType::f32, out_dtype_ = DType::f32;
  GeneratorInput<Buffer<>>* in_ = nullptr;
  GeneratorInput<int64_t>* correction_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

class RowsKernel : public Generator<RowsKernel> {
 public:
  GeneratorParam<std::string> op{"op", ""};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};
  GeneratorParam<std::string> schedule{"schedule", ""};  // "warp": a warp per row on CUDA

  // softmax and log_softmax take the input; their backward ops the forward's output and its
  // gradient ("grad"), laid out alike.
  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    int inputs = op_def(op.value()).num_inputs;
    for (int i = 0; i < inputs; ++i) in_.push_back(add_input<Buffer<>>(i == 0 ? "in" : "grad", halide_type(dtype_), 2));
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), 2);
  }

  void generate() {
    std::vector<HalideTensor> xs;
    Expr along_dense = Internal::const_true(), across_dense = Internal::const_true();
    const bool warp = schedule.value() == "warp";
    for (auto* p : in_) {
      auto& in = *p;
      in.dim(0).set_stride(Expr());
      Func f = warp ? clamped_rows(Func(in), in.dim(1).extent()) : Func(in);
      xs.push_back({f, {in.dim(1).extent(), in.dim(0).extent()}, dtype_});
      along_dense = along_dense && in.dim(0).stride() == 1;
      across_dense = across_dense && in.dim(1).stride() == 1;
    }
    Attrs a = parse_kernel_attrs(attrs);
    a.set("dim", int64_t(1));
    HalideTensor y = op_def(op.value()).define(xs, a)[0];

    Var c("c"), n("n");
    Func out = *out_;
    out(c, n) = y.func(c, n);
    out_->dim(0).set_stride(Expr());

    RowLayout layout;
    layout.row = n;
    layout.along = c;
    layout.rows = in_[0]->dim(1).extent();
    layout.length = in_[0]->dim(0).extent();
    layout.along_dense = along_dense && out_->dim(0).stride() == 1;
    layout.across_dense = across_dense && out_->dim(1).stride() == 1;
    layout.materialize_pure = true;
    layout.vector = natural_vector_size(halide_type(dtype_));
    if (get_target().has_gpu_feature()) warp ? schedule_rows_gpu_warp(out, layout) : schedule_rows_gpu(out, layout);
    else schedule_rows(out, layout);
  }

 private:
  DType dtype_ = DType::f32;
  std::vector<GeneratorInput<Buffer<>>*> in_;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::ReduceKernel, kiln_reduce)
HALIDE_REGISTER_GENERATOR(kiln::RowsKernel, kiln_rows)
