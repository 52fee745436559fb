// The eager embedding kernels, built from the embedding op's Halide definition on its canonical
// form: weight [V, D] and indices [N] with any strides, out dense [N, D] (Halide order: weight(d, v),
// indices(i), out(d, i)). Rows are moved as raw bits, so one kernel per element size serves every
// dtype (the DTYPES of kernels/embedding.cmake are carriers: bool 1 byte, f16 2, i32 4, i64 8);
// the VARIANT is the index dtype.
#include "dsl/halide_def.h"
#include "dsl/ops/runtime_attrs.h"
#include "dsl/parallel_grain.h"
#include "generators/kernel_params.h"

namespace kiln {
namespace {

using namespace Halide;

constexpr int kGpuLanes = 4;     // consecutive elements per CUDA thread
constexpr int kGpuThreads = 64;  // threads along a row
constexpr int kGpuRows = 4;      // rows per block

class EmbeddingKernel : public Generator<EmbeddingKernel> {
 public:
  GeneratorParam<std::string> op{"op", "embedding"};
  GeneratorParam<std::string> dtype{"dtype", "i32"};
  GeneratorParam<std::string> attrs{"attrs", "index_dtype:i64"};

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    index_dtype_ = dtype_from_name(parse_kernel_attrs(attrs).get<std::string>("index_dtype"));
    weight_ = add_input<Buffer<>>("weight", halide_type(dtype_), 2);
    indices_ = add_input<Buffer<>>("indices", halide_type(index_dtype_), 1);
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), 2);
  }

  void generate() {
    Input<Buffer<>>& w = *weight_;
    Input<Buffer<>>& idx = *indices_;
    w.dim(0).set_stride(Expr());
    idx.dim(0).set_stride(Expr());
    Var x("x"), y("y");
    Func w_in("w_in"), idx_in("idx_in");
    w_in(x, y) = w(x, y);
    idx_in(x) = idx(x);
    HalideTensor tw{w_in, {w.dim(1).extent(), w.dim(0).extent()}, dtype_};
    HalideTensor ti{idx_in, {idx.dim(0).extent()}, index_dtype_};
    HalideTensor result = op_def(op.value()).define({tw, ti}, {})[0];
    Func out = *out_;
    Var d("d0"), i("d1"), di("di");
    out(d, i) = result.func(d, i);

    const int vec = natural_vector_size(halide_type(dtype_));
    Expr depth = out.output_buffer().dim(0).extent();
    Expr big = depth * out.output_buffer().dim(1).extent() >= kParallelMinElements;
    Expr dense = w.dim(0).stride() == 1 && depth >= vec;
    if (get_target().has_gpu_feature()) {
      // Blocks of kGpuRows rows, their threads along a row, each moving kGpuLanes consecutive
      // elements: one index load per kGpuLanes elements and no division of a fused (d, i). A
      // thread per element of the fused index moved GPT-2's [8192, 768] rows at 1.45 TB/s on an
      // H200 (34.9 us). Rows narrower than kGpuLanes take one element per thread.
      auto rows = [&](Stage s, int lanes) {
        Var dq("dq"), dv("dv"), bx("bx"), by("by"), tx("tx"), ty("ty");
        Var across = d;
        if (lanes > 1) {
          s.split(d, dq, dv, lanes, TailStrategy::ShiftInwards).vectorize(dv);
          across = dq;
        }
        s.gpu_tile(across, i, bx, by, tx, ty, kGpuThreads, kGpuRows, TailStrategy::GuardWithIf);
      };
      rows(out.specialize(depth >= kGpuLanes), kGpuLanes);
      rows(out, 1);
      return;
    }
    out.specialize(dense && big).vectorize(d, vec, TailStrategy::ShiftInwards).parallel(i, 16, TailStrategy::GuardWithIf);
    out.specialize(dense).vectorize(d, vec, TailStrategy::ShiftInwards);
    out.specialize(big).parallel(i, 16, TailStrategy::GuardWithIf);
  }

 private:
  DType dtype_ = DType::i32, index_dtype_ = DType::i64;
  GeneratorInput<Buffer<>>* weight_ = nullptr;
  GeneratorInput<Buffer<>>* indices_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::EmbeddingKernel, kiln_embedding)

namespace kiln {
namespace {

using namespace Halide;

// The scatter-add of embedding_backward on its canonical form: grad [N, D] (Halide grad(d, n)),
// indices [N], the scalar num_rows, out dense [num_rows, D].
// On the CPU the update runs in parallel over chunks of D (each task owns whole columns, so no two
// tasks add into one element), vectorized inside a chunk; on CUDA every element adds atomically.
class EmbeddingBackwardKernel : public Generator<EmbeddingBackwardKernel> {
  static constexpr int kAtomicThreads = 128;  // columns per block of the CUDA scatter
  static constexpr int kAtomicTokens = 8;     // indices a thread of the CUDA scatter adds

 public:
  GeneratorParam<std::string> op{"op", "embedding_backward"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", "index_dtype:i64"};

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    index_dtype_ = dtype_from_name(parse_kernel_attrs(attrs).get<std::string>("index_dtype"));
    grad_ = add_input<Buffer<>>("grad", halide_type(dtype_), 2);
    indices_ = add_input<Buffer<>>("indices", halide_type(index_dtype_), 1);
    rows_ = add_input<int32_t>("num_rows");
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), 2);
  }

  void generate() {
    Input<Buffer<>>& g = *grad_;
    Input<Buffer<>>& idx = *indices_;
    Var x("x"), y("y");
    Func g_in("g_in"), idx_in("idx_in");
    g_in(x, y) = g(x, y);
    idx_in(x) = idx(x);
    HalideTensor tg{g_in, {g.dim(1).extent(), g.dim(0).extent()}, dtype_};
    HalideTensor ti{idx_in, {idx.dim(0).extent()}, index_dtype_};
    Func scatter;
    {
      RuntimeAttr rows("num_rows", *rows_);
      scatter = op_def(op.value()).define({tg, ti}, Attrs{{"num_rows", int64_t(0)}})[0].func;
    }
    // The scatter is the output itself: a copy of a computed table into the output moved the whole
    // table twice more (GPT-2's [50304, 768], 309 of the 510 MB the kernel moved).
    *out_ = scatter;

    const int vec = natural_vector_size(halide_type(dtype_));
    Var d = scatter.args()[0], xo("xo"), xi("xi");
    Expr depth = Func(*out_).output_buffer().dim(0).extent();
    if (get_target().has_gpu_feature()) {
      // A thread per column and kAtomicTokens indices adds their elements atomically (a thread per
      // column looping over all indices ran GPT-2's 8192 tokens x 768 columns on 768 threads). The order
      // of the adds into one row (repeated indices) varies from run to run, as in PyTorch's
      // index_add_ on CUDA.
      // The zero fill: 4 columns a thread, one 16-byte store, where the rows allow (GPT-2's
      // [50304, 768] table: a thread per element over the fused index took 130 us on one H200,
      // 1.2 TB/s, four times the scatter's 33 us).
      // Rows and indices run on the x blocks (up to 2^31 - 1; y and z stop at 65535).
      Var y0 = scatter.args()[1], f("f"), bx("bx"), tx("tx"), dO("do"), dI("di"), dv("dv"), yO("yo"), yI("yi");
      RVar n = scatter.rvars(0).at(0);
      Expr stride = Func(*out_).output_buffer().dim(1).stride();
      scatter.specialize(depth % 4 == 0 && stride % 4 == 0)
          .split(d, d, dv, 4, TailStrategy::RoundUp)
          .vectorize(dv)
          .split(d, dO, dI, 64, TailStrategy::GuardWithIf)
          .split(y0, yO, yI, 4, TailStrategy::GuardWithIf)
          .reorder(dv, dI, yI, yO, dO)
          .gpu_threads(dI, yI)
          .gpu_blocks(yO, dO);
      scatter.fuse(d, y0, f).gpu_tile(f, bx, tx, 256, TailStrategy::GuardWithIf);
      // The scatter's kAtomicTokens steps a thread are unrolled, their index and gradient loads
      // staged in registers before the atomics so that they are in flight together: interleaved,
      // each atomic waited for its load pair and the next pair for it. The last block's guard
      // makes the staged extent a variable, so its bound is stated (without it Halide staged the
      // values in a global buffer).
      RVar nO("no"), nI("ni");
      scatter.update()
          .atomic()
          .split(d, dO, dI, kAtomicThreads, TailStrategy::GuardWithIf)
          .split(n, nO, nI, kAtomicTokens, TailStrategy::GuardWithIf)
          .reorder(nI, dI, nO, dO)
          .unroll(nI)
          .gpu_blocks(nO, dO)
          .gpu_threads(dI);
      for (Func staged : {g_in.in(scatter), idx_in.in(scatter)}) {
        Var t = staged.args().back();
        staged.compute_at(scatter, dI).bound_storage(t, kAtomicTokens).store_in(MemoryType::Register);
        for (Var v : staged.args()) staged.unroll(v);
      }
      return;
    }
    scatter.specialize(depth >= vec).vectorize(d, vec, TailStrategy::GuardWithIf);
    scatter.update()
        .specialize(depth >= 4 * vec)
        .split(d, xo, xi, 4 * vec, TailStrategy::GuardWithIf)
        .vectorize(xi, vec)
        .parallel(xo);
  }

 private:
  DType dtype_ = DType::f32, index_dtype_ = DType::i64;
  GeneratorInput<Buffer<>>* grad_ = nullptr;
  GeneratorInput<Buffer<>>* indices_ = nullptr;
  GeneratorInput<int32_t>* rows_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::EmbeddingBackwardKernel, kiln_embedding_backward)
