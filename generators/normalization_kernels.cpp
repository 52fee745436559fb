// The eager kernels of layer_norm and cross_entropy, built from their Halide definitions:
//   layer_norm:    in and out [normalized (Halide dim 0), rows (dim 1)], any strides; variant
//                  "affine" also takes weight and bias [normalized]; eps is a scalar input;
//   cross_entropy: logits [classes (dim 0), N (dim 1)] and targets [N] (i64), any strides, ->
//                  a 0-d mean loss. Chunks of rows run in parallel, each row's logsumexp is
//                  rfactored into vector partials when the classes are dense; on CUDA a block
//                  per row.
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

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    Type t = halide_type(dtype_);
    in_ = add_input<Buffer<>>("in", t, 2);
    if (parse_kernel_attrs(attrs).get<std::string>("affine") == "true") {
      weight_ = add_input<Buffer<>>("weight", t, 1);
      bias_ = add_input<Buffer<>>("bias", t, 1);
    }
    eps_ = add_input<double>("eps");
    out_ = add_output<Buffer<>>("out", t, 2);
  }

  void generate() {
    auto& in = *in_;
    in.dim(0).set_stride(Expr());
    Expr length = in.dim(0).extent();
    std::vector<HalideTensor> inputs{{Func(in), {in.dim(1).extent(), length}, dtype_}};
    if (weight_) {
      inputs.push_back({Func(*weight_), {length}, dtype_});
      inputs.push_back({Func(*bias_), {length}, dtype_});
    }
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
    layout.along_dense = in.dim(0).stride() == 1 && out_->dim(0).stride() == 1;
    layout.across_dense = in.dim(1).stride() == 1 && out_->dim(1).stride() == 1;
    layout.materialize_pure = true;
    layout.vector = natural_vector_size(halide_type(dtype_));
    if (get_target().has_gpu_feature()) schedule_rows_gpu(out, layout);
    else schedule_rows(out, layout);
  }

 private:
  DType dtype_ = DType::f32;
  GeneratorInput<Buffer<>>*in_ = nullptr, *weight_ = nullptr, *bias_ = nullptr;
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
  }

  void generate() {
    auto &logits = *logits_, &targets = *targets_;
    logits.dim(0).set_stride(Expr());
    targets.dim(0).set_stride(Expr());
    Expr classes = logits.dim(0).extent(), rows = logits.dim(1).extent();
    HalideTensor x{Func(logits), {rows, classes}, dtype_};
    HalideTensor tg{Func(targets), {rows}, DType::i64};
    HalideTensor y = op_def(op.value()).define({x, tg}, {})[0];
    Func out = *out_;
    out() = y.func();

    // The mean over rows is the one Func with no pure dims; the rest is per row.
    Func total;
    std::vector<Func> per_row;
    for (const auto& [name, f] : Internal::find_transitive_calls(out.function())) {
      if (name == out.name()) continue;
      if (f.dimensions() == 0) total = Func(f);
      else per_row.push_back(Func(f));
    }
    if (get_target().has_gpu_feature()) schedule_gpu(out, total, per_row);
    else schedule_cpu(total, per_row, rows, classes);
  }

 private:
  void schedule_cpu(Func total, const std::vector<Func>& per_row, Expr rows, Expr classes) {
    const TailStrategy guard = TailStrategy::GuardWithIf;
    RVar ro("ro"), ri("ri");
    Var p("p");
    Expr rows_per_chunk = max(1, kElementsPerTask / max(classes, 1));
    Func chunks = total.update().split(total.rvars()[0], ro, ri, rows_per_chunk, guard).rfactor(ro, p);
    chunks.compute_root();
    Expr many_chunks = cast(Int(64), rows) * classes >= kParallelMinElements && rows > rows_per_chunk;
    chunks.update().specialize(many_chunks).parallel(p);
    int lanes = 4 * natural_vector_size(halide_type(dtype_));
    for (Func f : per_row) {
      f.compute_at(chunks, ri);
      if (f.has_update_definition()) vector_partials(f, (*logits_).dim(0).stride() == 1, LoopLevel(chunks, ri), lanes);
    }
  }

  // CUDA: one block per row computes that row's loss, each of the row's reductions (max, sum of
  // exponentials) split over kGpuThreads threads; then kGpuThreads threads sum every
  // kGpuThreads-th loss and one thread adds up their sums. (A thread per kGpuThreads-th row took
  // seconds over GPT-2's [8192, 50304] logits.)
  void schedule_gpu(Func out, Func total, const std::vector<Func>& per_row) {
    const TailStrategy guard = TailStrategy::GuardWithIf;
    std::map<std::string, Internal::Function> read = Internal::find_direct_calls(total.function());
    Func loss;
    for (const Func& f : per_row)
      if (read.count(f.name()) && !f.has_update_definition()) loss = f;
    Var n = loss.args().at(0);
    loss.compute_root().gpu_blocks(n);
    for (Func f : per_row) {
      if (f.name() == loss.name() || !f.has_update_definition()) continue;
      f.compute_at(loss, n);
      RVar ro("ro"), ri("ri");
      Var u("u");
      Func partials = f.update().split(f.rvars()[0], ro, ri, kGpuThreads, guard).rfactor(ri, u);
      partials.compute_at(loss, n).gpu_threads(u);
      partials.update().reorder(ro, u).gpu_threads(u);
    }
    RVar ro("ro"), ri("ri");
    Var u("u"), bx("bx"), tx("tx");
    Func partials = total.update().split(total.rvars()[0], ro, ri, kGpuThreads, guard).rfactor(ri, u);
    partials.compute_root().gpu_tile(u, bx, tx, kGpuThreads, guard);
    partials.update().reorder(ro, u).gpu_tile(u, bx, tx, kGpuThreads, guard);
    total.compute_root().gpu_single_thread();
    total.update().gpu_single_thread();
    out.gpu_single_thread();
  }

 private:
  DType dtype_ = DType::f32;
  GeneratorInput<Buffer<>>*logits_ = nullptr, *targets_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::LayerNormKernel, kiln_layer_norm)
HALIDE_REGISTER_GENERATOR(kiln::CrossEntropyKernel, kiln_cross_entropy)
