// The eager tape and backward engine: accumulation, shared subexpressions, grad mode, freed
// graphs, version counters, leaves and names, and an MLP that learns a known function.
#include <algorithm>
#include <cmath>

#include "autograd/derivatives.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(gradients_sum_over_shared_uses_and_accumulate_across_calls) {
  Tensor x = random_tensor({5}, f64, 1).requires_grad_();
  Tensor y = (x * x + x).sum();  // d/dx = 2x + 1
  y.backward();
  std::vector<double> xv = host_values(x), want;
  for (double v : xv) want.push_back(2 * v + 1);
  check_close(x.grad(), want, {5}, "first backward");
  (x * 3.0).sum().backward();  // accumulates
  for (double& w : want) w += 3;
  check_close(x.grad(), want, {5}, "accumulated");
}

BOOST_AUTO_TEST_CASE(leaves_names_and_detach) {
  Tensor a = random_tensor({2, 3}, f32, 2).requires_grad_();
  Tensor b = random_tensor({2, 3}, f32, 3);
  BOOST_TEST(a.is_leaf());
  BOOST_TEST(a.requires_grad());
  BOOST_TEST(!b.requires_grad());
  Tensor c = a * b;
  BOOST_TEST(!c.is_leaf());
  BOOST_TEST(c.requires_grad());
  BOOST_TEST(c.grad_fn_name() == "MulBackward");
  BOOST_TEST(softmax(c, -1).grad_fn_name() == "SoftmaxBackward");
  BOOST_TEST(a.grad_fn_name() == "");
  Tensor d = c.detach();
  BOOST_TEST(!d.requires_grad());
  BOOST_TEST(d.shares_storage_with(c));
  BOOST_TEST(!(b * 2.0).requires_grad());
  BOOST_TEST(!gt(a, 0.0).requires_grad());  // comparisons carry no gradient
  check_error([&] { c.requires_grad_(); }, {"requires_grad_", "leaves", "MulBackward"});
  check_error([&] { from_vector<int64_t>({1, 2}).requires_grad_(); }, {"requires_grad_", "floating", "i64"});
}

BOOST_AUTO_TEST_CASE(grad_mode_guards) {
  Tensor a = random_tensor({3}, f32, 4).requires_grad_();
  {
    NoGradGuard g;
    BOOST_TEST(!grad_enabled());
    Tensor b = a * 2.0;
    BOOST_TEST(!b.requires_grad());
    {
      EnableGradGuard e;
      BOOST_TEST((a * 2.0).requires_grad());
    }
    BOOST_TEST(!grad_enabled());
  }
  BOOST_TEST(grad_enabled());
}

BOOST_AUTO_TEST_CASE(backward_errors) {
  Tensor a = random_tensor({3}, f32, 5).requires_grad_();
  Tensor y = (a * a).sum();
  y.backward();
  check_error([&] { y.backward(); }, {"backward", "freed", "SumBackward", "retain_graph"});

  Tensor z = (a * a).sum();
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();  // allowed once more
  check_close(a.grad(), [&] {
    std::vector<double> w;
    for (double v : host_values(a)) w.push_back(2 * v * 3);  // three backward passes in all
    return w;
  }(), {3}, "retain_graph");

  Tensor v = a * 2.0;
  check_error([&] { v.backward(); }, {"backward", "[3]", "one-element"});
  check_error([&] { v.backward(random_tensor({4}, f32, 6)); }, {"backward", "[4]", "[3]"});
  check_error([&] { random_tensor({1}, f32, 7).backward(); }, {"backward", "does not require grad"});
}

BOOST_AUTO_TEST_CASE(saved_tensor_modified_in_place_is_detected) {
  Tensor a = random_tensor({4}, f32, 8).requires_grad_();
  Tensor b = random_tensor({4}, f32, 9);
  Tensor y = (a * b).sum();  // MulBackward saved b
  static_cast<float*>(b.data_ptr())[0] = 42.0f;  // an in-place write, as in-place ops will do
  b.storage()->version++;
  check_error([&] { y.backward(); }, {"backward", "MulBackward", "modified in place", "version 0 -> 1"});
}

BOOST_AUTO_TEST_CASE(gradient_dtype_follows_the_leaf) {
  Tensor a = random_tensor({3}, f32, 10).requires_grad_();
  Tensor w = random_tensor({3}, f64, 11);
  (a * w).sum().backward();  // computed in f64
  BOOST_TEST(a.grad().dtype() == f32);
  check_close(a.grad(), host_values(w.to(f32)), {3}, "grad of a");
}

BOOST_AUTO_TEST_CASE(mlp_learns_a_known_function) {
  // y = sin(2x) on [-1.5, 1.5] with a 1-32-32-1 tanh MLP, full-batch gradient descent with
  // momentum written out by hand (optimizers arrive with nn/optim).
  manual_seed(7);
  Tensor x = linspace(-1.5, 1.5, 128).unsqueeze(1);
  Tensor target = sin(x * 2.0);
  auto init = [](Shape s, double scale) { return (randn(s) * scale).requires_grad_(); };
  std::vector<Tensor> params = {init({32, 1}, 1.0), init({32}, 0.1), init({32, 32}, 1.0 / std::sqrt(32.0)),
                                init({32}, 0.1), init({1, 32}, 1.0 / std::sqrt(32.0)), init({1}, 0.1)};
  std::vector<Tensor> velocity;
  for (const Tensor& p : params) velocity.push_back(zeros(p.shape()));
  auto loss_of = [&] {
    Tensor h = tanh(linear(x, params[0], params[1]));
    h = tanh(linear(h, params[2], params[3]));
    return mean(square(linear(h, params[4], params[5]) - target));
  };
  float first = loss_of().item<float>(), last = first;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = loss_of();
    loss.backward();
    last = loss.item<float>();
    NoGradGuard g;
    for (size_t i = 0; i < params.size(); ++i) {
      velocity[i] = velocity[i] * 0.9 + params[i].grad();
      params[i] = (params[i] - velocity[i] * 0.05).detach().requires_grad_();
    }
  }
  BOOST_TEST_MESSAGE("mlp loss " << first << " -> " << last);
  BOOST_TEST(last < 0.01);
  BOOST_TEST(last < 0.1 * first);
}

// A rule skips the inputs that want no gradient (the scale and the mask fill of attention are
// 0-d constants: their gradients were full reductions of the scores), and the gradients it
// still computes are the ones it computes when every input wants one.
BOOST_AUTO_TEST_CASE(rules_skip_inputs_that_need_no_gradient) {
  Tensor a = random_tensor({4, 3}, f64, 11), c = random_tensor({}, f64, 12), g = random_tensor({4, 3}, f64, 13);
  for (const char* name : {"add", "sub", "mul", "div", "pow"}) {
    const OpDef& def = op_def(name);
    Tensor x = name == std::string("pow") ? abs(a) + 0.5 : a;
    Tensor out = dispatch(def, {x, c}, {})[0];
    TensorList both = derivative_rule(def)({x, c}, {out}, {g}, {}, {true, true});
    TensorList first = derivative_rule(def)({x, c}, {out}, {g}, {}, {true, false});
    TensorList second = derivative_rule(def)({x, c}, {out}, {g}, {}, {false, true});
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(both[1].defined());
      BOOST_TEST(!first[1].defined());
      BOOST_TEST(!second[0].defined());
      check_close(first[0], host_values(both[0]), {4, 3}, std::string(name) + " d/dx alone");
      check_close(second[1], host_values(both[1]), {}, std::string(name) + " d/dc alone");
    }
  }
  Tensor mask = gt(a, 0.0), fill = full({}, -1e9, {.dtype = f64});
  Tensor w = where(mask, a, fill);
  TensorList grads = derivative_rule(op_def("where"))({mask, a, fill}, {w}, {g}, {}, {false, true, false});
  BOOST_TEST(!grads[2].defined());
  std::vector<double> gv = host_values(g), mv = host_values(mask.to(f64)), want;
  for (size_t i = 0; i < gv.size(); ++i) want.push_back(mv[i] != 0 ? gv[i] : 0.0);
  check_close(grads[1], want, {4, 3}, "where d/da");
  Tensor x = random_tensor({5, 4}, f64, 14), wt = random_tensor({4, 3}, f64, 15);
  Tensor gy = random_tensor({5, 3}, f64, 17);
  TensorList mm = derivative_rule(op_def("matmul"))({x, wt}, {matmul(x, wt)}, {gy}, {}, {false, true});
  TensorList mm_both = derivative_rule(op_def("matmul"))({x, wt}, {matmul(x, wt)}, {gy}, {}, {true, true});
  BOOST_TEST(!mm[0].defined());
  check_close(mm[1], host_values(mm_both[1]), {4, 3}, "matmul d/dw alone");
  // Through the engine: a constant operand gets no gradient, the other the right one.
  Tensor p = random_tensor({4, 3}, f64, 16).requires_grad_();
  (p * c).sum().backward();
  std::vector<double> cv = host_values(c), pg(12, cv[0]);
  check_close(p.grad(), pg, {4, 3}, "d/dp sum(p * c)");
}

// Tensor::on_grad_ready: once per backward pass per leaf, after the last of its gradient (a leaf
// used by several nodes), with grad() complete; leaves the pass does not reach get no call; a
// callback queued by a hook runs after every hook.
BOOST_AUTO_TEST_CASE(grad_ready_hooks_run_once_per_leaf_when_its_gradient_is_complete) {
  Tensor w = randn({3}).requires_grad_();
  Tensor b = randn({3}).requires_grad_();
  Tensor unused = randn({3}).requires_grad_();
  std::vector<std::string> events;
  std::vector<float> seen;
  w.on_grad_ready([&](const Tensor& leaf) {
    events.push_back("w");
    seen = leaf.grad().to_vector<float>();
    queue_backward_callback([&] { events.push_back("end"); });
  });
  b.on_grad_ready([&](const Tensor&) { events.push_back("b"); });
  unused.on_grad_ready([&](const Tensor&) { events.push_back("unused"); });
  Tensor x = randn({3});
  // w is used twice (two nodes feed its gradient): dL/dw = x + 2 w.
  Tensor loss = ((w * x).sum() + (w * w).sum() + b.sum());
  loss.backward();
  BOOST_TEST(events.size() == 3u);
  BOOST_TEST(std::count(events.begin(), events.end(), "w") == 1);
  BOOST_TEST(std::count(events.begin(), events.end(), "b") == 1);
  BOOST_TEST(events.back() == "end");
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(seen[i] == xs[i] + 2 * ws[i], boost::test_tools::tolerance(1e-5f));
  BOOST_CHECK_THROW(queue_backward_callback([] {}), Error);  // no backward pass running
  BOOST_CHECK_THROW(loss.on_grad_ready([](const Tensor&) {}), Error);  // not a leaf
}

// GradHookHandle::remove: the removed hook stops, the others stay, in their order; removing twice
// or after the tensor is gone is harmless.
BOOST_AUTO_TEST_CASE(a_removed_grad_ready_hook_no_longer_runs) {
  Tensor w = randn({3}).requires_grad_();
  std::vector<std::string> events;
  GradHookHandle first = w.on_grad_ready([&](const Tensor&) { events.push_back("first"); });
  GradHookHandle second = w.on_grad_ready([&](const Tensor&) { events.push_back("second"); });
  w.on_grad_ready([&](const Tensor&) { events.push_back("third"); });
  (w * w).sum().backward();
  BOOST_TEST((events == std::vector<std::string>{"first", "second", "third"}));
  second.remove();
  second.remove();
  events.clear();
  (w * w).sum().backward();
  BOOST_TEST((events == std::vector<std::string>{"first", "third"}));
  GradHookHandle gone;
  {
    Tensor t = randn({2}).requires_grad_();
    gone = t.on_grad_ready([](const Tensor&) {});
  }
  gone.remove();
  GradHookHandle().remove();
}
