// A whole training step under kiln::compile: forward, loss, backward() and the optimizer's
// update captured as one graph (graph/tracer.h: the backward recorded into the graph, copy_ into
// parameters and optimizer state recorded functionally and written back). Parameters after each
// step must equal those of the same step run eagerly, on both backends.
#include "bench/train_step.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

void check_params(const TensorList& got, const TensorList& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    check_close(got[i], host_values(want[i]), want[i].shape(), {2e-4, 2e-5}, what + " parameter " + std::to_string(i));
}

}  // namespace

BOOST_AUTO_TEST_CASE(adamw_steps_of_every_zoo_model_match_eager) {
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT("model " << name) {
      manual_seed(31);
      zoo::ZooModel eager = zoo::make_zoo_model(name, zoo::ZooSize::test);
      manual_seed(31);
      zoo::ZooModel compiled = zoo::make_zoo_model(name, zoo::ZooSize::test);
      // eps 1e-3: with a tiny eps, Adam's first steps are lr * sign(g) where g is near 0, and the
      // parameters would compare the rounding of the two backwards rather than their values.
      optim::AdamW eager_opt(eager.module->parameters(), {.lr = 1e-2, .eps = 1e-3});
      optim::AdamW compiled_opt(compiled.module->parameters(), {.lr = 1e-2, .eps = 1e-3});
      // forward, loss, backward, step, zero_grad
      auto step = [](zoo::ZooModel& m, optim::Optimizer& o, const TensorList& in) { return bench::train_step(m, o, in); };
      auto f = compile([&](std::vector<Tensor> in) { return step(compiled, compiled_opt, in); },
                       {.backend = backend_under_test(), .fullgraph = true, .name = name + " step"});
      for (int i = 0; i < 3; ++i) {
        TensorList in = eager.make_inputs();
        Tensor want = step(eager, eager_opt, in);
        Tensor got = f(in);
        check_close(got, host_values(want), {}, name + " loss, step " + std::to_string(i));
        check_params(compiled.module->parameters(), eager.module->parameters(), name + " step " + std::to_string(i));
        for (const Tensor& p : compiled.module->parameters()) BOOST_TEST(!p.grad().defined());
      }
      BOOST_TEST(f.stats().compiles == 1);
      BOOST_TEST(f.stats().cache_hits == 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(sgd_with_momentum_and_gradients_left_for_the_caller) {
  // The step leaves the gradients set: they are graph outputs written into grad(). The next call
  // finds gradients present, so it recompiles, and the backward goes through the tape instead.
  Tensor w = random_tensor({8, 4}, DType::f32, 41), w2 = w.clone();
  w.requires_grad_();
  w2.requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9}), opt2({w2}, {.lr = 0.1, .momentum = 0.9});
  auto step = [](const Tensor& p, optim::Optimizer& o, const Tensor& x) {
    Tensor loss = square(tanh(matmul(x, p))).mean();
    loss.backward();
    o.step();
    return loss;
  };
  auto f = compile([&](const Tensor& x) { return step(w, opt, x); }, {.backend = backend_under_test()});
  for (int i = 0; i < 3; ++i) {
    Tensor x = random_tensor({5, 8}, DType::f32, 50 + uint64_t(i));
    Tensor want = step(w2, opt2, x);
    Tensor got = f(x);
    check_close(got, host_values(want), {}, "loss " + std::to_string(i));
    check_close(w, host_values(w2), {8, 4}, {2e-5, 2e-6}, "w after step " + std::to_string(i));
    BOOST_TEST_REQUIRE(w.grad().defined());
    check_close(w.grad(), host_values(w2.grad()), {8, 4}, {2e-5, 2e-6}, "w.grad after step " + std::to_string(i));
  }
  BOOST_TEST(f.stats().recompiles >= 1);
  BOOST_TEST(f.stats().recompile_reasons[0].find("holds a gradient") != std::string::npos,
             f.stats().recompile_reasons[0]);
}

BOOST_AUTO_TEST_CASE(writes_into_a_view_still_break_the_graph) {
  Tensor big = random_tensor({4, 4}, DType::f32, 60);
  auto f = compile([&](const Tensor& x) {
    big.narrow(0, 0, 2).copy_(x * 2.0);  // not a whole tensor: written now, between two graphs
    return big.sum();
  }, {.backend = backend_under_test()});
  Tensor x = random_tensor({2, 4}, DType::f32, 61);
  Tensor want_big = big.clone();
  want_big.narrow(0, 0, 2).copy_(x * 2.0);
  Tensor s = f(x);
  check_close(big, host_values(want_big), {4, 4}, "big");
  check_close(s, host_values(want_big.sum()), {}, "sum");
  BOOST_TEST(explain(f, x).breaks.size() == 1u);
}
