// The eager matmul kernels, built from the matmul op's Halide definition on its canonical form:
// a as [B, M, K] and b as [B, K, N] with any strides (stride 0 on broadcast batch dims), out dense
// [B, M, N] (Halide dims innermost first: a(k, m, b), b(n, k, b), out(n, m, b)).
//
// Two schedules (the VARIANT of kernels/matmul.cmake):
//   tiled: a register-blocked GEMM. Each task owns an NR-wide panel of columns for a chunk of rows
//          of one batch; it packs that panel of b (K x NR, contiguous, whatever b's strides) and
//          sweeps MR x NR output tiles whose accumulators stay in registers while k runs. Tiles
//          at the edges shift inwards, so any M >= MR and N >= NR works (the runner sends
//          M >= 8 and N >= 32, the largest tile of all targets).
//   rows:  any size: one row of the output at a time, one vector of columns at a time with the
//          sum over k in a register; rows in parallel when the problem is big enough.
#include "dsl/halide_def.h"
#include "generators/kernel_params.h"

namespace kiln {
namespace {

using namespace Halide;

constexpr int kRank = 3;
constexpr int kRowsPerTask = 256;
constexpr int kParallelMinMacs = 1 << 16;

class MatmulKernel : public Generator<MatmulKernel> {
 public:
  GeneratorParam<std::string> op{"op", "matmul"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", "schedule:tiled"};

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    KILN_CHECK(dtype_ == DType::f32 || dtype_ == DType::f64, "matmul generator: kernels exist for f32 "
               "and f64 only (f16/bf16 compute through f32), got ", dtype_);
    a_ = add_input<Buffer<>>("a", halide_type(dtype_), kRank);
    b_ = add_input<Buffer<>>("b", halide_type(dtype_), kRank);
    out_ = add_output<Buffer<>>("out", halide_type(dtype_), kRank);
  }

  void generate() {
    Attrs a = parse_kernel_attrs(attrs);
    Input<Buffer<>>& ain = *a_;
    Input<Buffer<>>& bin = *b_;
    ain.dim(0).set_stride(Expr());
    bin.dim(0).set_stride(Expr());
    a_in_(x_, y_, z_) = ain(x_, y_, z_);
    b_in_(x_, y_, z_) = bin(x_, y_, z_);
    auto shape_of = [](Input<Buffer<>>& buf) {
      return std::vector<Expr>{buf.dim(2).extent(), buf.dim(1).extent(), buf.dim(0).extent()};
    };
    HalideTensor ta{a_in_, shape_of(ain), dtype_};
    HalideTensor tb{b_in_, shape_of(bin), dtype_};
    HalideTensor result = op_def(op.value()).define({ta, tb}, a)[0];
    acc_ = result.func;
    std::vector<Var> v = acc_.args();
    n_ = v[0], m_ = v[1], batch_ = v[2];
    Func out = *out_;
    out(n_, m_, batch_) = acc_(n_, m_, batch_);

    const std::string& schedule = a.get<std::string>("schedule");
    if (schedule == "tiled") {
      schedule_tiled(out);
    } else {
      KILN_CHECK(schedule == "rows", "matmul generator: unknown schedule '", schedule, "'");
      schedule_rows(out);
    }
  }

 private:
  // Register tile per target: NR columns (a few vectors) by MR rows, sized so the accumulators
  // plus one row of b and a broadcast of a fit in the vector registers (32 with AVX-512, else 16).
  void tile_size(int& nr, int& mr) const {
    bool avx512 = natural_vector_size(Float(32)) >= 16;
    nr = 2 * vector_size();
    mr = avx512 ? 8 : 6;
  }

  int vector_size() const { return natural_vector_size(halide_type(dtype_)); }

  void schedule_tiled(Func out) {
    int nr, mr;
    tile_size(nr, mr);
    const int vec = vector_size();
    Var no("no"), ni("ni"), mo("mo"), mi("mi"), mc("mc"), task("task");
    RVar k = acc_.rvars(0)[0];
    out.split(n_, no, ni, nr, TailStrategy::ShiftInwards)
        .split(m_, mo, mi, mr, TailStrategy::ShiftInwards)
        .split(mo, mc, mo, std::max(1, kRowsPerTask / mr), TailStrategy::GuardWithIf)
        .reorder(ni, mi, mo, no, mc, batch_)
        .fuse(no, mc, task)
        .fuse(task, batch_, task)
        .parallel(task)
        .vectorize(ni, vec)
        .unroll(ni)
        .unroll(mi);
    acc_.compute_at(out, mo).vectorize(n_, vec).unroll(n_).unroll(m_);
    acc_.update().reorder(n_, m_, k).vectorize(n_, vec).unroll(n_).unroll(m_);

    // The packed panel of b: K x NR values, contiguous along n. Transposed b (k contiguous) packs
    // with gathers: measured faster than 2-D transposing blocks, and the panel is reused by all
    // the task's rows.
    b_in_.compute_at(out, task);
    b_in_.specialize((*b_).dim(0).stride() == 1).vectorize(x_, vec);
    b_in_.vectorize(x_, vec);
  }

  void schedule_rows(Func out) {
    const int vec = vector_size();
    RVar k = acc_.rvars(0)[0];
    Expr work = out.output_buffer().dim(0).extent() * out.output_buffer().dim(1).extent() * (*a_).dim(0).extent();
    out.specialize(work >= kParallelMinMacs).parallel(m_);
    acc_.compute_at(out, m_).vectorize(n_, vec, TailStrategy::GuardWithIf);
    Var no("no"), ni("ni");
    acc_.update()
        .split(n_, no, ni, vec, TailStrategy::GuardWithIf)
        .reorder(ni, k, no)  // one vector of the row stays in a register while k runs
        .vectorize(ni);
  }

  DType dtype_ = DType::f32;
  GeneratorInput<Buffer<>>* a_ = nullptr;
  GeneratorInput<Buffer<>>* b_ = nullptr;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
  Var x_{"x"}, y_{"y"}, z_{"z"};
  Var n_, m_, batch_;  // the definition's vars
  Func a_in_{"a_in"}, b_in_{"b_in"}, acc_;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::MatmulKernel, kiln_matmul)
