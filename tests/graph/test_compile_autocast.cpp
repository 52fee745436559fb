// Autocast and GradScaler inside compiled functions (CPU, both backends through KILN_BACKEND,
// halide by default): autocast's casts are nodes of the captured graph, a compiled call matches
// the eager call under autocast, the autocast state is guarded (a change recompiles and says
// why), and a whole mixed-precision training step with a GradScaler, an injected overflow
// included, matches the same step run eagerly.
#include <limits>

#include "support/reference.h"
#include "support/scaled_step.h"

using namespace kiln;
using namespace kiln::test;

namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_compiled_call_under_autocast_matches_eager_and_records_the_casts) {
  manual_seed(3);
  nn::GptConfig c{.vocab = 50, .seq = 8, .width = 32, .heads = 4, .layers = 2};
  nn::TinyGpt model(c);
  model.eval();
  Tensor tokens = from_vector<int64_t>({1, 5, 9, 2, 7, 3, 3, 0, 4, 8, 11, 40, 2, 6, 1, 0}, {2, 8});
  auto f = compile([&](const Tensor& t) { return model.forward(t); }, {.backend = backend_under_test()});
  NoGradGuard no_grad;
  AutocastGuard ac(Device::cpu(), DType::bf16);
  Tensor want = model.forward(tokens);
  Tensor got = f(tokens);
  BOOST_TEST(want.dtype() == DType::bf16);  // the head is a linear
  BOOST_TEST(got.dtype() == want.dtype());
  check_close(got, host_values(want), want.shape(), {2e-2, 2e-2}, "TinyGpt logits under bf16 autocast");
  ExplainReport r = f.explain(tokens);
  BOOST_TEST_REQUIRE(r.graphs.size() == 1u);
  BOOST_TEST(count(r.graphs[0], "cast") >= 2 * c.layers, r.graphs[0]);
  bool guarded = false;
  for (const std::string& g : r.guards) guarded = guarded || g == "autocast is cpu bf16";
  BOOST_TEST(guarded);
}

BOOST_AUTO_TEST_CASE(a_change_of_autocast_state_recompiles) {
  Tensor w = random_tensor({16, 8}, DType::f32, 1);
  auto f = compile([&](const Tensor& x) { return softmax(matmul(x, w), -1); }, {.backend = backend_under_test()});
  Tensor x = random_tensor({4, 16}, DType::f32, 2);
  Tensor plain = f(x);
  Tensor mixed;
  {
    AutocastGuard ac(Device::cpu(), DType::bf16);
    mixed = f(x);
  }
  Tensor plain_again = f(x);
  BOOST_TEST(plain.dtype() == DType::f32);
  BOOST_TEST(mixed.dtype() == DType::f32);  // softmax computes and returns f32
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().cache_hits == 1);
  BOOST_TEST_REQUIRE(f.stats().recompile_reasons.size() == 1u);
  BOOST_TEST(f.stats().recompile_reasons[0].find("autocast: off -> cpu bf16") != std::string::npos,
             f.stats().recompile_reasons[0]);
  check_close(plain_again, host_values(plain), plain.shape(), {0, 0}, "the f32 graph again");
  // The bf16 product differs from the f32 one by bf16's rounding of the operands, not more.
  check_close(mixed, host_values(plain), plain.shape(), {5e-2, 1e-2}, "bf16 product against f32");
}

// The step: forward and loss under autocast inside the compiled function, backward outside it,
// the GradScaler's scale, unscale, skip and update, and AdamW. Step 2 feeds an inf.
BOOST_AUTO_TEST_CASE(a_mixed_precision_training_step_with_a_grad_scaler_matches_eager) {
  auto make = [] {
    manual_seed(11);
    return std::make_shared<nn::MLP>(std::vector<int64_t>{12, 24, 5});
  };
  auto eager_model = make(), compiled_model = make();
  optim::AdamW eager_opt(eager_model->parameters(), {.lr = 1e-2}), compiled_opt(compiled_model->parameters(), {.lr = 1e-2});
  optim::GradScaler eager_scaler(Device::cpu(), {.init_scale = 1024, .growth_interval = 2});
  optim::GradScaler compiled_scaler(Device::cpu(), {.init_scale = 1024, .growth_interval = 2});
  auto step = [](nn::MLP& m, optim::AdamW& opt, optim::GradScaler& scaler, const Tensor& x, const Tensor& y) {
    return scaled_step(m, opt, scaler, x, y, Device::cpu(), DType::f16);
  };
  auto f = compile([&](const Tensor& x, const Tensor& y) { return step(*compiled_model, compiled_opt, compiled_scaler, x, y); },
                   {.backend = backend_under_test(), .fullgraph = true, .name = "f16 step"});
  Tensor y = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2});
  for (int i = 0; i < 5; ++i) {
    BOOST_TEST_CONTEXT("step " << i) {
      Tensor x = scaled_step_input(i);
      Tensor want = step(*eager_model, eager_opt, eager_scaler, x, y);
      Tensor got = f(x, y);
      if (i != 2) check_close(got, host_values(want), {}, {1e-3, 1e-4}, "loss");
      BOOST_TEST(compiled_scaler.get_scale() == eager_scaler.get_scale());
      BOOST_TEST(compiled_scaler.growth_tracker().item<float>() == eager_scaler.growth_tracker().item<float>());
      std::vector<Tensor> pc = compiled_model->parameters(), pe = eager_model->parameters();
      for (size_t k = 0; k < pc.size(); ++k)
        check_close(pc[k], host_values(pe[k]), pe[k].shape(), {2e-3, 2e-4}, "parameter " + std::to_string(k));
    }
  }
  // 1024, 2048 after two clean steps, 1024 after the overflow, then 2048 again after two more.
  BOOST_TEST(eager_scaler.get_scale() == 2048.0);
  BOOST_TEST(f.stats().compiles == 1);
}
