// Compiled training (graph/autodiff.h, graph/partition.h, graph/autograd_function.h): on the
// halide backend, a compiled function whose inputs require grad runs a compiled forward and hangs
// one node on the tape whose backward is a compiled graph. Its gradients must equal the eager
// tape's, for hand-made functions and every zoo model, and it must keep no more bytes alive.
#include <iostream>
#include <sstream>

#include "bench/zoo.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {


struct CaptureStderr {
  std::ostringstream text;
  std::streambuf* old = std::cerr.rdbuf(text.rdbuf());
  ~CaptureStderr() { std::cerr.rdbuf(old); }
};

Tensor leaf(const Shape& shape, uint64_t seed) {
  Tensor t = random_tensor(shape, f32, seed);
  t.requires_grad_();
  return t;
}

TensorList grads_of(const TensorList& leaves) {
  TensorList g;
  for (const Tensor& t : leaves) {
    BOOST_TEST_REQUIRE(t.grad().defined());
    g.push_back(t.grad());
  }
  return g;
}

void clear_grads(const TensorList& leaves) {
  for (const Tensor& t : leaves) t.set_grad(Tensor());
}

void check_same(const TensorList& got, const TensorList& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    check_close(got[i], host_values(want[i]), want[i].shape(), {2e-4, 2e-5}, what + " " + std::to_string(i));
}

}  // namespace

BOOST_AUTO_TEST_CASE(compiled_function_gradients_equal_eager) {
  Tensor x = leaf({6, 16}, 1), w = leaf({16, 24}, 2), b = leaf({24}, 3), g = leaf({24}, 4);
  auto fn = [&](const Tensor& in) {
    Tensor h = gelu(matmul(in, w) + b);
    return (layer_norm(h, {24}, g, Tensor()) * softmax(h, -1)).sum();
  };
  auto f = compile(fn, {.backend = "halide", .name = "small"});
  for (int call = 0; call < 2; ++call) {
    Tensor xin = random_tensor({6, 16}, f32, 10 + uint64_t(call));
    xin.requires_grad_();
    TensorList leaves{xin, w, b, g};
    clear_grads(leaves);
    Tensor loss = f(xin);
    BOOST_TEST(loss.grad_fn_name() == "CompiledFunctionBackward");
    loss.backward();
    TensorList compiled = grads_of(leaves);
    clear_grads(leaves);
    Tensor eager = fn(xin);
    eager.backward();
    check_close(loss, host_values(eager), {}, "loss");
    check_same(compiled, grads_of(leaves), "gradient of leaf");
  }
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 1);
}

BOOST_AUTO_TEST_CASE(gradients_flow_on_into_eager_nodes_and_accumulate) {
  // The input comes from an eager op (its gradient continues into the tape before the
  // function), one output is used twice and another not at all, and leaves accumulate.
  Tensor a = leaf({4, 8}, 5), w = leaf({8, 8}, 6);
  auto fn = [&](const Tensor& x) { return std::make_pair(tanh(matmul(x, w)), exp(x) * 2.0); };
  auto f = compile(fn, {.backend = "halide"});
  auto loss_of = [](const std::pair<Tensor, Tensor>& y) { return (y.first * y.first).sum() + y.first.mean(); };
  TensorList leaves{a, w};
  for (int round = 0; round < 2; ++round) {  // the second round adds onto the first's gradients
    loss_of(f(sin(a))).backward();
  }
  TensorList compiled = grads_of(leaves);
  clear_grads(leaves);
  for (int round = 0; round < 2; ++round) loss_of(fn(sin(a))).backward();
  check_same(compiled, grads_of(leaves), "accumulated gradient");
}

BOOST_AUTO_TEST_CASE(a_saved_input_changed_in_place_is_an_error) {
  Tensor w = leaf({8, 8}, 7);
  auto f = compile([&](const Tensor& x) { return matmul(x, w).sum(); }, {.backend = "halide"});
  Tensor x = leaf({3, 8}, 8);
  Tensor loss = f(x);
  x.detach().copy_(random_tensor({3, 8}, f32, 9));  // the backward needs x for w's gradient
  check_error([&] { loss.backward(); }, {"CompiledFunctionBackward", "modified in place"});
}

BOOST_AUTO_TEST_CASE(retain_graph_and_higher_order_requests) {
  Tensor w = leaf({5}, 11);
  auto f = compile([&](const Tensor& x) { return (exp(x * w)).sum(); }, {.backend = "halide"});
  Tensor x = random_tensor({5}, f32, 12);
  Tensor loss = f(x);
  loss.backward(Tensor(), /*retain_graph=*/true);
  Tensor once = w.grad().clone();
  loss.backward();
  check_close(w.grad(), host_values(once * 2.0), {5}, "twice");
  check_error([&] { loss.backward(); }, {"already freed"});
  Tensor again = f(x);
  check_error([&] { again.backward(Tensor(), false, /*create_graph=*/true); },
              {"create_graph", "CompiledFunctionBackward", "compiled graph"});
}

BOOST_AUTO_TEST_CASE(no_grad_calls_attach_nothing) {
  Tensor w = leaf({5}, 13);
  auto f = compile([&](const Tensor& x) { return x * w; }, {.backend = "halide"});
  Tensor x = random_tensor({5}, f32, 14);
  BOOST_TEST(f(x).requires_grad());
  NoGradGuard no_grad;
  Tensor y = f(x);
  BOOST_TEST(!y.requires_grad());
  check_close(y, host_values(x * w.detach()), {5}, "no-grad output");
}

BOOST_AUTO_TEST_CASE(partition_is_logged_with_the_eager_bytes) {
  Tensor w = leaf({32, 32}, 15);
  auto f = compile([&](const Tensor& x) { return gelu(matmul(x, w)).sum(); }, {.backend = "halide", .name = "logged"});
  set_logs("partition");
  CaptureStderr cap;
  f(random_tensor({16, 32}, f32, 16)).backward();
  set_logs("");
  std::string text = cap.text.str();
  BOOST_TEST(text.find("[kiln:partition] logged graph 1: saves 1 values (2048 bytes)") != std::string::npos, text);
  BOOST_TEST(text.find("the eager tape would keep") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(zoo_models_train_compiled_like_eager) {
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT("model " << name) {
      manual_seed(21);
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
      TensorList params = m.module->parameters();
      auto f = zoo::compile_zoo_loss(m, {.backend = "halide", .name = name});
      for (int call = 0; call < 2; ++call) {
        TensorList in = m.make_inputs();
        for (Tensor& x : in)
          if (is_floating(x.dtype())) x.requires_grad_();
        TensorList leaves = params;
        for (const Tensor& x : in)
          if (x.requires_grad()) leaves.push_back(x);
        clear_grads(leaves);
        Tensor loss = f(in);
        int64_t compiled_bytes = tape_saved_bytes(loss, leaves);
        loss.backward();
        TensorList compiled = grads_of(leaves);
        clear_grads(leaves);
        Tensor eager = m.loss(m.forward(in));
        int64_t eager_bytes = tape_saved_bytes(eager, leaves);
        eager.backward();
        check_close(loss, host_values(eager), {}, name + " loss");
        check_same(compiled, grads_of(leaves), name + " gradient");
        BOOST_TEST(compiled_bytes <= eager_bytes, name << ": compiled saves " << compiled_bytes << " bytes, eager "
                                                       << eager_bytes);
        BOOST_TEST(compiled_bytes > 0);
      }
      BOOST_TEST(f.stats().compiles == 1);
    }
  }
}
