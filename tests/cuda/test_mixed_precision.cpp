// Mixed-precision training steps compiled on CUDA against the same steps run eagerly on CUDA:
// forward and loss under autocast (bf16 or f16), backward, a GradScaler's scale, unscale, skip
// and update where one is used, and AdamW; step 2 feeds an inf, which a GradScaler must skip.
// Each case is its own test (a crash in one names it).
#include <limits>

#include "cuda/cuda_available.h"
#include "support/reference.h"
#include "support/scaled_step.h"

using namespace kiln;
using namespace kiln::test;

namespace {

void check_compiled_step(DType t, bool scaled) {
  auto make = [] {
    manual_seed(11);
    auto m = std::make_shared<nn::MLP>(std::vector<int64_t>{12, 24, 5});
    m->to(kCuda);
    return m;
  };
  auto eager_model = make(), compiled_model = make();
  optim::AdamW eager_opt(eager_model->parameters(), {.lr = 1e-2}), compiled_opt(compiled_model->parameters(), {.lr = 1e-2});
  const optim::GradScalerOptions options{.init_scale = 1024, .growth_interval = 2, .enabled = scaled};
  optim::GradScaler eager_scaler(kCuda, options), compiled_scaler(kCuda, options);
  auto step = [t](nn::MLP& m, optim::AdamW& opt, optim::GradScaler& scaler, const Tensor& x, const Tensor& y) {
    return scaled_step(m, opt, scaler, x, y, kCuda, t);
  };
  auto f = compile([&](const Tensor& x, const Tensor& y) { return step(*compiled_model, compiled_opt, compiled_scaler, x, y); },
                   {.backend = "halide", .fullgraph = true, .name = std::string(name(t)) + " step"});
  Tensor y = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}).to(kCuda);
  // bf16 keeps 8 bits: eager and compiled round the products' outputs at different points.
  const Tolerance tol = t == DType::bf16 ? Tolerance{1e-2, 1e-3} : Tolerance{3e-3, 3e-4};
  const int steps = scaled ? 5 : 2;  // without a scaler an inf would poison the weights
  for (int i = 0; i < steps; ++i) {
    BOOST_TEST_CONTEXT(name(t) << (scaled ? " with" : " without") << " a GradScaler, step " << i) {
      Tensor x = scaled_step_input(i);
      x = x.to(kCuda);
      Tensor want = step(*eager_model, eager_opt, eager_scaler, x, y);
      Tensor got = f(x, y);
      if (i != 2) check_close(got, host_values(want), {}, tol, "loss");
      BOOST_TEST(compiled_scaler.get_scale() == eager_scaler.get_scale());
      std::vector<Tensor> pc = compiled_model->parameters(), pe = eager_model->parameters();
      for (size_t k = 0; k < pc.size(); ++k)
        check_close(pc[k], host_values(pe[k]), pe[k].shape(), tol, "parameter " + std::to_string(k));
    }
  }
  if (scaled) BOOST_TEST(eager_scaler.get_scale() == 2048.0);  // 1024, 2048, 1024 after the inf, 2048
  BOOST_TEST(f.stats().compiles == 1);
}

}  // namespace

BOOST_AUTO_TEST_CASE(f16_step_with_a_grad_scaler_matches_eager, *needs_cuda()) { check_compiled_step(DType::f16, true); }

BOOST_AUTO_TEST_CASE(bf16_step_with_a_grad_scaler_matches_eager, *needs_cuda()) { check_compiled_step(DType::bf16, true); }

BOOST_AUTO_TEST_CASE(f16_step_without_a_grad_scaler_matches_eager, *needs_cuda()) {
  check_compiled_step(DType::f16, false);
}

BOOST_AUTO_TEST_CASE(bf16_step_without_a_grad_scaler_matches_eager, *needs_cuda()) {
  check_compiled_step(DType::bf16, false);
}
