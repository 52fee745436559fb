// The eager kernels of layer_norm and cross_entropy, built from their Halide definitions:
//   layer_norm:    in and out [normalized (Halide dim 0), rows (dim 1)], any strides; variant
//                  "affine" also takes weight and bias [normalized]; eps is a scalar input;
//                  layer_norm_backward takes in, grad (laid out like in) and, "affine", weight;
//   cross_entropy: logits [classes (dim 0), N (dim 1)] and targets [N] (i64), any strides, ->
//                  a 0-d mean loss and each row's log-sum-exp [N]. Chunks of rows run in
//                  parallel, each row's log-sum-exp rfactored into vector partials when the
//                  classes are dense; on CUDA a block per row;
//   cross_entropy_backward: logits and out [classes (dim 0), N (dim 1)], targets [N] (i64), the
//                  forward's log-sum-exp [N] and the loss gradient (0-d), scheduled as a
//                  row-wise op (no reduction: one pass).
#include <map>
#include <optional>
#include <string>

#include "dsl/halide_def.h"
#include "dsl/ops/runtime_attrs.h"
#include "generators/kernel_params.h"
#include "generators/row_schedule.h"

namespace kiln {
namespace {

using namespace Halide;

class LayerNormKernel : public Generator<LayerNormKernel> {
 public:
  GeneratorParam<std::string> op{"op", "layer_norm"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};
  GeneratorParam<std::string> schedule{"schedule", ""};  // "warp": a warp per row on CUDA

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    Type t = halide_type(dtype_);
    backward_ = op.value() == "layer_norm_backward";
    in_ = add_input<Buffer<>>("in", t, 2);
    if (backward_) grad_ = add_input<Buffer<>>("grad", t, 2);
    if (parse_kernel_attrs(attrs).get<std::string>("affine") == "true") {
      weight_ = add_input<Buffer<>>("weight", t, 1);
      if (!backward_) bias_ = add_input<Buffer<>>("bias", t, 1);
    }
    eps_ = add_input<double>("eps");
    out_ = add_output<Buffer<>>("out", t, 2);
  }

  void generate() {
    auto& in = *in_;
    in.dim(0).set_stride(Expr());
    Expr length = in.dim(0).extent();
    const bool warp = schedule.value() == "warp";
    auto rows_input = [&](const Func& f) { return warp ? clamped_rows(f, in.dim(1).extent()) : f; };
    std::vector<HalideTensor> inputs{{rows_input(Func(in)), {in.dim(1).extent(), length}, dtype_}};
    Expr along_dense = in.dim(0).stride() == 1, across_dense = in.dim(1).stride() == 1;
    if (grad_) {
      grad_->dim(0).set_stride(Expr());
      inputs.push_back({rows_input(Func(*grad_)), {in.dim(1).extent(), length}, dtype_});
      along_dense = along_dense && grad_->dim(0).stride() == 1;
      across_dense = across_dense && grad_->dim(1).stride() == 1;
    }
    if (weight_) inputs.push_back({Func(*weight_), {length}, dtype_});
    if (bias_) inputs.push_back({Func(*bias_), {length}, dtype_});
    // Only the length of normalized_shape is read by the definition.
    Attrs a{{"normalized_shape", std::vector<int64_t>{1}}};
    RuntimeAttr eps("eps", Expr(*eps_));
    HalideTensor y = op_def(op.value()).define(inputs, a)[0];

    Var d("d"), n("n");
    Func out = *out_;
    out(d, n) = y.func(d, n);
    out_->dim(0).set_stride(Expr());

    RowLayout layout;
    layout.row = n;
    layout.along = d;
    layout.rows = in.dim(1).extent();
    layout.length = length;
    layout.along_dense = along_dense && out_->dim(0).stride() == 1;
    layout.across_dense = across_dense && out_->dim(1).stride() == 1;
    layout.materialize_pure = true;
    layout.vector = natural_vector_size(halide_type(dtype_));
    if (get_target().has_gpu_feature()) warp ? schedule_rows_gpu_warp(out, layout) : schedule_rows_gpu(out, layout);
    else schedule_rows(out, layout);
  }

 private:
  DType dtype_ = DType::f32;
  bool backward_ = false;
  GeneratorInput<Buffer<>>*in_ = nullptr, *grad_ = nullptr, *weight_ = nullptr, *bias_ = nullptr;
  GeneratorInput<double>* eps_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

class CrossEntropyKernel : public Generator<CrossEntropyKernel> {
 public:
  GeneratorParam<std::string> op{"op", "cross_entropy"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    logits_ = add_input<Buffer<>>("logits", halide_type(dtype_), 2);
    targets_ = add_input<Buffer<>>("targets", Int(64), 1);
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), 0);
    lse_ = add_output<Buffer<>>("lse", halide_type(dtype_), 1);
  }

  void generate() {
    auto &logits = *logits_, &targets = *targets_;
    logits.dim(0).set_stride(Expr());
    targets.dim(0).set_stride(Expr());
    Expr classes = logits.dim(0).extent(), rows = logits.dim(1).extent();
    HalideTensor x{Func(logits), {rows, classes}, dtype_};
    HalideTensor tg{Func(targets), {rows}, DType::i64};
    std::vector<HalideTensor> y = op_def(op.value()).define({x, tg}, {});
    Func out = *out_, lse_out = *lse_;
    out() = y[0].func();
    Var n("n");
    lse_out(n) = y[1].func(n);

    // Each row's log-sum-exp (the Func the lse output stores, and the loss reads) is computed
    // once, with the row's reductions inside; the mean of the losses then reads it.
    Func lse;
    for (const auto& [name, f] : Internal::find_direct_calls(y[1].func.function())) lse = Func(f);
    Func total;
    std::vector<Func> reductions;
    for (const auto& [name, f] : Internal::find_transitive_calls(out.function())) {
      if (f.has_update_definition() && f.args().empty()) total = Func(f);
      else if (f.has_update_definition()) reductions.push_back(Func(f));
    }
    if (get_target().has_gpu_feature()) schedule_gpu(out, lse_out, lse, total, reductions);
    else schedule_cpu(lse_out, lse, total, reductions, rows, classes);
  }

 private:
  void schedule_cpu(Func lse_out, Func lse, Func total, const std::vector<Func>& reductions, Expr rows, Expr classes) {
    const TailStrategy guard = TailStrategy::GuardWithIf;
    Var n = lse.args().at(0), no("no"), ni("ni");
    Expr rows_per_chunk = max(1, kElementsPerTask / max(classes, 1));
    lse.compute_root().split(n, no, ni, rows_per_chunk, guard);
    Expr many_chunks = cast(Int(64), rows) * classes >= kParallelMinElements && rows > rows_per_chunk;
    lse.specialize(many_chunks).parallel(no);
    int lanes = 4 * natural_vector_size(halide_type(dtype_));
    for (Func f : reductions) {
      f.compute_at(lse, ni);
      vector_partials(f, (*logits_).dim(0).stride() == 1, LoopLevel(lse, ni), lanes);
    }
    total.compute_root();
    lse_out.vectorize(lse_out.args()[0], natural_vector_size(halide_type(dtype_)), guard);
  }

  // CUDA: one block per row computes its log-sum-exp, each of the row's reductions (max, sum of
  // exponentials) split over kGpuThreads threads; then kGpuThreads threads sum every
  // kGpuThreads-th loss and one thread adds up their sums. (A thread per kGpuThreads-th row took
  // seconds over GPT-2's [8192, 50304] logits.)
  void schedule_gpu(Func out, Func lse_out, Func lse, Func total, const std::vector<Func>& reductions) {
    const TailStrategy guard = TailStrategy::GuardWithIf;
    Var n = lse.args().at(0);
    lse.compute_root().gpu_blocks(n);
    for (Func f : reductions) {
      f.compute_at(lse, n);
      RVar ro("ro"), ri("ri");
      Var u("u");
      Func partials = f.update().split(f.rvars()[0], ro, ri, kGpuThreads, guard).rfactor(ri, u);
      partials.compute_at(lse, n).gpu_threads(u);
      partials.update().reorder(ro, u).gpu_threads(u);
      warp_rows::unroll_steps(partials.update(), ro, kGpuUnroll);
    }
    RVar ro("ro"), ri("ri");
    Var u("u"), bx("bx"), tx("tx");
    Func partials = total.update().split(total.rvars()[0], ro, ri, kGpuThreads, guard).rfactor(ri, u);
    partials.compute_root().gpu_tile(u, bx, tx, kGpuThreads, guard);
    partials.update().reorder(ro, u).gpu_tile(u, bx, tx, kGpuThreads, guard);
    total.compute_root().gpu_single_thread();
    total.update().gpu_single_thread();
    out.gpu_single_thread();
    lse_out.gpu_tile(lse_out.args()[0], bx, tx, kGpuThreads, guard);
  }

  DType dtype_ = DType::f32;
  GeneratorInput<Buffer<>>*logits_ = nullptr, *targets_ = nullptr;
  GeneratorOutput<Buffer<>>*out_ = nullptr, *lse_ = nullptr;
};

class CrossEntropyBackwardKernel : public Generator<CrossEntropyBackwardKernel> {
 public:
  GeneratorParam<std::string> op{"op", "cross_entropy_backward"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    logits_ = add_input<Buffer<>>("logits", halide_type(dtype_), 2);
    targets_ = add_input<Buffer<>>("targets", Int(64), 1);
    lse_ = add_input<Buffer<>>("lse", halide_type(dtype_), 1);
    grad_ = add_input<Buffer<>>("grad", halide_type(dtype_), 0);
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), 2);
  }

  void generate() {
    auto &logits = *logits_, &targets = *targets_;
    logits.dim(0).set_stride(Expr());
    targets.dim(0).set_stride(Expr());
    lse_->dim(0).set_stride(Expr());  // 0 for unbatched logits
    Expr classes = logits.dim(0).extent(), rows = logits.dim(1).extent();
    HalideTensor x{Func(logits), {rows, classes}, dtype_};
    HalideTensor tg{Func(targets), {rows}, DType::i64};
    HalideTensor lse{Func(*lse_), {rows}, dtype_};
    HalideTensor g{Func(*grad_), {}, dtype_};
    HalideTensor y = op_def(op.value()).define({x, tg, lse, g}, {})[0];
    Var c("c"), n("n");
    Func out = *out_;
    out(c, n) = y.func(c, n);
    out_->dim(0).set_stride(Expr());

    RowLayout layout;
    layout.row = n;
    layout.along = c;
    layout.rows = rows;
    layout.length = classes;
    layout.along_dense = logits.dim(0).stride() == 1 && out_->dim(0).stride() == 1;
    layout.across_dense = logits.dim(1).stride() == 1 && out_->dim(1).stride() == 1;
    layout.materialize_pure = true;
    layout.vector = natural_vector_size(halide_type(dtype_));
    if (get_target().has_gpu_feature()) schedule_rows_gpu(out, layout);
    else schedule_rows(out, layout);
  }

 private:
  DType dtype_ = DType::f32;
  GeneratorInput<Buffer<>>*logits_ = nullptr, *targets_ = nullptr, *lse_ = nullptr, *grad_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::CrossEntropyBackwardKernel, kiln_cross_entropy_backward)
HALIDE_REGISTER_GENERATOR(kiln::LayerNormKernel, kiln_layer_norm)
HALIDE_REGISTER_GENERATOR(kiln::CrossEntropyKernel, kiln_cross_entropy)
