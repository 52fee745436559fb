// The eager pointwise kernels (unary, binary, where, cast), built at build time from each op's
// Halide definition. Canonical form: rank 4, innermost dim first; inputs may be strided and
// broadcast (stride 0); the output may be a strided view. Dense inner strides and large sizes get
// specialized vectorized and parallel loops.
#include "dsl/halide_def.h"
#include "dsl/ops/math_functions.h"
#include "dsl/parallel_grain.h"
#include "generators/kernel_params.h"

namespace kiln {
namespace {

using namespace Halide;

constexpr int kRank = 4;

class PointwiseKernel : public Generator<PointwiseKernel> {
 public:
  GeneratorParam<std::string> op{"op", ""};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};

  void configure() {
    const OpDef& def = op_def(op.value());
    Attrs a = parse_kernel_attrs(attrs);
    DType t = dtype_from_name(dtype.value());
    for (int i = 0; i < def.num_inputs; ++i) {
      DType ti = i == def.condition_input ? DType::bool_ : t;
      in_dtypes_.push_back(ti);
      ins_.push_back(add_input<Buffer<>>("in" + std::to_string(i), halide_type(ti), kRank));
    }
    std::vector<TensorMeta> metas;
    for (DType ti : in_dtypes_) metas.push_back({{}, ti, Device::cpu()});
    out_dtype_ = def.infer(metas, a)[0].dtype;
    out_ = add_output<Buffer<>>("out", halide_type(out_dtype_), kRank);
  }

  void generate() {
    const OpDef& def = op_def(op.value());
    Attrs a = parse_kernel_attrs(attrs);
    std::vector<Var> v = halide_vars(kRank);
    std::vector<Expr> args(v.begin(), v.end());
    std::vector<Expr> values;
    for (size_t i = 0; i < ins_.size(); ++i) {
      (*ins_[i]).dim(0).set_stride(Expr());  // strided and broadcast inputs are allowed
      values.push_back(load_value((*ins_[i])(args), in_dtypes_[i]));
    }
    Func out = *out_;
    out(v) = store_value(def.pointwise(values, a), out_dtype_);
    out_->dim(0).set_stride(Expr());  // outputs may be views (cat writes into slices)
    if (get_target().has_gpu_feature()) {
      use_libdevice_math({out});
      schedule_gpu(out, v);
    } else {
      schedule(out, v);
    }
  }

 private:
  // Vectorized loops for each combination of dense (1) and broadcast (0) inner strides of the
  // inputs: large tensors split long rows into chunks (or take whole short rows) as parallel
  // tasks, small ones stay serial (no thread-pool wake-up). A single input read transposed
  // (inner stride of dim 1 is 1) gets 2-D tiles, so its strided reads stay in L1. A generic
  // strided fallback comes last.
  void schedule(Func out, const std::vector<Var>& v) {
    const int vec = natural_vector_size(halide_type(out_dtype_).bits() > 32 ? Float(64) : Float(32));
    const int chunk = 8192;
    Expr n = out.output_buffer().dim(0).extent();
    Expr rows = out.output_buffer().dim(1).extent();
    for (int i = 2; i < kRank; ++i) rows *= out.output_buffer().dim(i).extent();
    Expr big = n * rows >= kParallelMinElements;
    Var y1("y1"), y("y"), t("t"), xo("xo"), xi("xi"), xv("xv"), yo("yo"), yi("yi");
    out.fuse(v[2], v[3], y1).fuse(v[1], y1, y);

    for (const Expr& cond : dense_conditions()) {
      Expr c = cond && n >= vec;
      out.specialize(c && big && n >= chunk)
          .split(v[0], xo, xi, chunk, TailStrategy::ShiftInwards)
          .split(xi, xi, xv, vec)
          .vectorize(xv)
          .fuse(xo, y, t)
          .parallel(t);
      out.specialize(c && big)
          .split(v[0], xo, xv, vec, TailStrategy::ShiftInwards)
          .vectorize(xv)
          .parallel(y, max(1, chunk / n), TailStrategy::GuardWithIf);
      out.specialize(c).split(v[0], xo, xv, vec, TailStrategy::ShiftInwards).vectorize(xv);
    }
    if (ins_.size() == 1) {
      const int tile = 16;
      Expr transposed = out_->dim(0).stride() == 1 && (*ins_[0]).dim(1).stride() == 1 &&
                        (*ins_[0]).dim(0).stride() != 1 && n >= tile && out_->dim(1).extent() >= tile;
      out.specialize(transposed)
          .tile(v[0], y, xo, yo, xi, yi, tile, tile, TailStrategy::GuardWithIf)
          .vectorize(xi)
          .unroll(yi)
          .fuse(xo, yo, t)
          .parallel(t, 8, TailStrategy::GuardWithIf);
    }
    out.specialize(big).parallel(y);
  }

  // CUDA: one thread per 4 consecutive elements of a row (16-byte accesses for f32) when rows are
  // a multiple of 4 long, else one per element; 256 threads per block over all dims fused.
  void schedule_gpu(Func out, const std::vector<Var>& v) {
    Var y1("y1"), y("y"), f("f"), xo("xo"), xi("xi"), bx("bx"), tx("tx");
    Expr n = out.output_buffer().dim(0).extent();
    out.fuse(v[2], v[3], y1).fuse(v[1], y1, y);
    out.specialize(n % 4 == 0)
        .split(v[0], xo, xi, 4, TailStrategy::RoundUp)
        .vectorize(xi)
        .fuse(xo, y, f)
        .gpu_tile(f, bx, tx, 256, TailStrategy::GuardWithIf);
    out.fuse(v[0], y, f).gpu_tile(f, bx, tx, 256, TailStrategy::GuardWithIf);
  }

  // Inner-stride combinations worth a dense path: all inputs contiguous, and for two or more
  // inputs, each one broadcast along the inner dim while the others are contiguous.
  std::vector<Expr> dense_conditions() {
    std::vector<Expr> conds;
    size_t n = ins_.size();
    for (size_t mask = 0; mask < (size_t(1) << n); ++mask) {
      size_t zeros = __builtin_popcountll(mask);
      if (zeros > 1 || (zeros == 1 && n == 1)) continue;
      Expr c = out_->dim(0).stride() == 1;
      for (size_t i = 0; i < n; ++i)
        c = c && (*ins_[i]).dim(0).stride() == ((mask >> i) & 1 ? 0 : 1);
      conds.push_back(c);
    }
    return conds;
  }

  std::vector<GeneratorInput<Buffer<>>*> ins_;
  std::vector<DType> in_dtypes_;
  GeneratorOutput<Buffer<>>* out_ = nullptr;
  DType out_dtype_ = DType::f32;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::PointwiseKernel, kiln_pointwise)
