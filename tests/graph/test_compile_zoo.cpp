// Every zoo model, compiled, gives its eager outputs and gradients; so does a function that
// breaks its graph in the middle of a model.
#include "bench/zoo.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

void check_same(const TensorList& got, const TensorList& want, const std::string& what,
                Tolerance tol = tolerance(DType::f32)) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    check_close(got[i], host_values(want[i]), want[i].shape(), tol, what + " output " + std::to_string(i));
}

}  // namespace

BOOST_AUTO_TEST_CASE(zoo_models_compiled_equal_eager) {
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT("model " << name) {
      manual_seed(1);
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
      auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); }, {.name = name});
      for (int call = 0; call < 3; ++call) {
        TensorList in = m.make_inputs();
        check_same(f(in), m.forward(in), name + " call " + std::to_string(call));
      }
      CompileStats s = f.stats();
      BOOST_TEST(s.compiles == 1);
      BOOST_TEST(s.recompiles == 0);
      BOOST_TEST(s.cache_hits == 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(zoo_model_gradients_through_compiled_forward) {
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT("model " << name) {
      manual_seed(2);
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
      auto params = m.module->parameters();
      TensorList in = m.make_inputs();
      auto grads = [&](const TensorList& out) {
        for (Tensor& p : params) p.set_grad(Tensor());
        Tensor loss = out[0].sum();
        loss.backward();
        TensorList g;
        for (Tensor& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : zeros(p.shape()));
        return g;
      };
      auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); });
      TensorList compiled = grads(f(in)), eager = grads(m.forward(in));
      // On the halide backend the backward is a compiled graph: sums run in another order.
      check_same(compiled, eager, name + " parameter gradients", {2e-4, 2e-5});
    }
  }
}

BOOST_AUTO_TEST_CASE(breaks_inside_a_model_give_eager_results) {
  manual_seed(3);
  zoo::ZooModel m = zoo::make_zoo_model("transformer_block", zoo::ZooSize::test);
  auto fn = [&](std::vector<Tensor> xs) {
    Tensor y = m.forward(xs)[0];
    // A host read: the graph breaks here. (A value read on the host and fed back into the graph,
    // like y / max, would be a constant of the next graph and recompile it for each new value.)
    if (abs(y).max().item<double>() > 1e6) y = y * 0.0;
    return std::vector<Tensor>{softmax(y, -1), y * 2.0};
  };
  auto f = compile(fn);
  for (int call = 0; call < 3; ++call) {
    TensorList in = m.make_inputs();
    check_same(f(in), fn(in), "call " + std::to_string(call));
  }
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(explain(f, m.make_inputs()).breaks.size() == 1u);
}

BOOST_AUTO_TEST_CASE(transformer_block_with_a_dynamic_batch) {
  // The attention reads only T on the host (for its mask), so the batch dim stays symbolic.
  // Inference: a compiled backward (halide backend with grad on) takes host sizes in its
  // derivative rules and specializes the batch (graph/README.md, "Compiled training").
  NoGradGuard no_grad;
  manual_seed(4);
  nn::TransformerBlock block(32, 4);
  auto f = compile(block);
  Tensor x = random_tensor({2, 16, 32}, f32, 1);
  mark_dynamic(x, 0);
  f(x);
  for (int64_t b : {3, 5}) {
    Tensor xb = random_tensor({b, 16, 32}, f32, uint64_t(b));
    check_close(f(xb), host_values(block.forward(xb)), {b, 16, 32}, "batch " + std::to_string(b));
  }
  BOOST_TEST(f.stats().recompiles == 0);
  f(random_tensor({2, 12, 32}, f32, 9));  // T is specialized: a new length recompiles
  BOOST_TEST(f.stats().recompiles == 1);
}
