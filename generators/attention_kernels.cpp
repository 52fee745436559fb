// The eager CUDA kernel of the attention op's probabilities (dsl/eager/attention_cuda.cpp runs the
// rest of the op as cuBLAS GEMMs). From the scores s = q k^T as [keys (Halide dim 0), rows (dim
// 1)], rows = batch * heads * queries, any strides:
//   x(c, n)     = scale * s(c, n), or -inf where the causal mask hides key c from query
//                 n % queries (c > n % queries; queries 0: no mask);
//   lse(n)      = the log-sum-exp of row n of x (logsumexp's definition);
//   probs(c, n) = exp(x(c, n) - lse(n)).
// variant "probs" outputs probs and lse (the forward); "from_lse" takes lse and outputs probs (the
// backward recomputes them). A warp per row (schedules/gpu_warp_rows.h): lse is one kernel (its
// two reductions read the row from L2 after the first pass), probs a second that reads each
// score once.
#include "dsl/halide_def.h"
#include "generators/kernel_params.h"
#include "generators/row_schedule.h"

namespace kiln {
namespace {

using namespace Halide;

class AttentionProbsKernel : public Generator<AttentionProbsKernel> {
 public:
  GeneratorParam<std::string> op{"op", "attention"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};  // "lse:given": the from_lse variant

  void configure() {
    dtype_ = dtype_from_name(dtype.value());
    Type t = halide_type(dtype_);
    given_ = parse_kernel_attrs(attrs).get_or<std::string>("lse", "") == "given";
    scores_ = add_input<Buffer<>>("scores", t, 2);
    if (given_) lse_in_ = add_input<Buffer<>>("lse_in", t, 1);
    scale_ = add_input<float>("scale");
    queries_ = add_input<int32_t>("queries");
    probs_ = add_output<Buffer<>>("probs", t, 2);
    if (!given_) lse_ = add_output<Buffer<>>("lse", t, 1);
  }

  void generate() {
    auto& s = *scores_;
    s.dim(0).set_stride(Expr());
    Expr keys = s.dim(0).extent(), rows = s.dim(1).extent();
    Func in = clamped_rows(Func(s), rows);
    Var c("c"), n("n");
    Func x("masked_scores");
    Expr q = *queries_;
    Expr hidden = q > 0 && c > n % max(q, 1);
    x(c, n) = select(hidden, Float(32).min(), *scale_ * in(c, n));  // Float(32).min(): -inf
    Func lse;
    if (given_) {
      lse = Func(*lse_in_);
    } else {
      Attrs a{{"dims", std::vector<int64_t>{1}}, {"keepdim", false}};
      HalideTensor l = op_def("logsumexp").define({{x, {rows, keys}, dtype_}}, a)[0];
      lse = *lse_;
      lse(n) = l.func(n);
    }
    Func probs = *probs_;
    probs(c, n) = exp(x(c, n) - lse(n));
    probs_->dim(0).set_stride(Expr());

    if (!get_target().has_gpu_feature()) {  // the family is CUDA-only; a plain schedule elsewhere
      if (!given_) lse.compute_root();
      return;
    }
    Var rb("rb"), ry("ry"), fl("fl");
    if (!given_) {  // a warp per row, lane 0 writing the row's value
      lse.split(n, rb, ry, kGpuWarpRows, TailStrategy::GuardWithIf)
          .split(ry, ry, fl, 1, TailStrategy::RoundUp)
          .gpu_threads(fl, ry)
          .gpu_blocks(rb);
      for (Func f : per_row_funcs(lse, false)) warp_rows::warp_reduction(f, lse, rb, 1, kGpuUnroll);
    }
    probs.split(n, rb, ry, kGpuWarpRows, TailStrategy::GuardWithIf);
    warp_rows::row_wise_lanes(probs, c, ry, rb, 1, kGpuUnroll);
    probs.gpu_blocks(rb);
  }

 private:
  DType dtype_ = DType::f32;
  bool given_ = false;
  GeneratorInput<Buffer<>>*scores_ = nullptr, *lse_in_ = nullptr;
  GeneratorInput<float>* scale_ = nullptr;
  GeneratorInput<int32_t>* queries_ = nullptr;
  GeneratorOutput<Buffer<>>*probs_ = nullptr, *lse_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::AttentionProbsKernel, kiln_attention_probs)
