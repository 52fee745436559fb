// Mixed-precision training steps compiled on CUDA against the same steps run eagerly on CUDA:
// forward and loss under autocast (bf16 or f16), backward, a GradScaler's scale, unscale, skip
// and update where one is used, and AdamW; step 2 feeds an inf, which a GradScaler must skip.
// Also a transformer block whose GELU runs in cuBLASLt's epilogues. Each case is its own test (a
// crash in one names it).
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

// A transformer block with GPT-2's tanh GELU: its bf16 training step compiled on CUDA, where the
// fc product, bias and GELU run as one cuBLASLt call and GELU's derivative in the epilogue of the
// gradient's product (graph/passes.h: cublas_gelu_epilogues), against the same step run eagerly
// on CUDA (GELU's own kernels). SGD, so that the weights move by the gradients themselves.
BOOST_AUTO_TEST_CASE(bf16_step_with_gelu_epilogues_matches_eager, *needs_cuda()) {
  auto make = [] {
    manual_seed(12);
    auto m = std::make_shared<nn::TransformerBlock>(64, 4, "tanh");
    m->to(kCuda);
    return m;
  };
  auto eager_model = make(), compiled_model = make();
  optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.1}), compiled_opt(compiled_model->parameters(), {.lr = 0.1});
  auto step = [](nn::TransformerBlock& m, optim::SGD& opt, const Tensor& x) {
    Tensor loss;
    {
      AutocastGuard autocast(kCuda, DType::bf16);
      Tensor y = m.forward(x).to(DType::f32);
      loss = mean(y * y);
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
  auto f = compile([&](const Tensor& x) { return step(*compiled_model, compiled_opt, x); },
                   {.backend = "halide", .fullgraph = true, .name = "gelu epilogue step"});
  const Tolerance tol{2e-2, 2e-3};  // bf16 rounds GELU's input before (eager) or after (epilogue) GELU
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST_CONTEXT("step " << i) {
      Tensor x = random_tensor({2, 16, 64}, DType::f32, uint64_t(90 + i)).to(kCuda);
      Tensor want = step(*eager_model, eager_opt, x);
      Tensor got = f(x);
      check_close(got, host_values(want), {}, tol, "loss");
      std::vector<Tensor> pc = compiled_model->parameters(), pe = eager_model->parameters();
      for (size_t k = 0; k < pc.size(); ++k)
        check_close(pc[k], host_values(pe[k]), pe[k].shape(), tol, "parameter " + std::to_string(k));
    }
  }
  BOOST_TEST(f.stats().compiles == 1);
}
