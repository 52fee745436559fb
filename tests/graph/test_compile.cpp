// Scenario tests that pin kiln::compile's semantics: when it traces, recompiles (and why), goes
// dynamic, breaks graphs, falls back to eager; and that compiled results equal eager ones.
#include <atomic>
#include <thread>

#include "graph/guards.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Compiled and eager results of the same function agree to float tolerance.
void check_same(const Tensor& compiled, const Tensor& eager, const std::string& what) {
  check_close(compiled, host_values(eager), eager.shape(), what);
}

Tensor mlp_fn(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  return relu(matmul(x, w1) + 0.5) * 2.0 - matmul(x, w2).sum({1}, true);
}

}  // namespace

BOOST_AUTO_TEST_CASE(cache_hit_runs_the_graph_without_the_function) {
  Tensor w1 = random_tensor({16, 8}, f32, 1), w2 = random_tensor({16, 3}, f32, 2);
  int traced = 0;
  auto f = compile([&](const Tensor& x) {
    ++traced;
    return mlp_fn(x, w1, w2);
  });
  for (int call = 0; call < 3; ++call) {
    Tensor x = random_tensor({4, 16}, f32, 10 + call);
    check_same(f(x), mlp_fn(x, w1, w2), "call " + std::to_string(call));
  }
  BOOST_TEST(traced == 1);
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 1);
  BOOST_TEST(s.recompiles == 0);
  BOOST_TEST(s.cache_hits == 2);
}

BOOST_AUTO_TEST_CASE(captured_tensors_are_read_by_reference) {
  Tensor w = random_tensor({8, 8}, f32, 3);
  auto f = compile([&](const Tensor& x) { return matmul(x, w); });
  Tensor x = random_tensor({2, 8}, f32, 4);
  f(x);
  w.copy_(random_tensor({8, 8}, f32, 5));  // in place: the cached graph must see it
  check_same(f(x), matmul(x, w), "after an in-place update of a captured tensor");
  BOOST_TEST(f.stats().recompiles == 0);
}

BOOST_AUTO_TEST_CASE(size_change_recompiles_once_then_goes_dynamic) {
  auto f = compile([](const Tensor& x) { return softmax(x * 2.0, -1) + x.mean({0}, true); });
  f(random_tensor({32, 8}, f32, 1));
  Tensor x64 = random_tensor({64, 8}, f32, 2);
  check_same(f(x64), softmax(x64 * 2.0, -1) + x64.mean({0}, true), "after the recompile");
  CompileStats s = f.stats();
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.recompile_reasons.at(0) == "arg 0 dim 0: 32 -> 64");
  for (int64_t n : {48, 7, 100}) {  // dim 0 is symbolic now: no more recompiles
    Tensor x = random_tensor({n, 8}, f32, uint64_t(n));
    check_same(f(x), softmax(x * 2.0, -1) + x.mean({0}, true), "n = " + std::to_string(n));
  }
  BOOST_TEST(f.stats().recompiles == 1);
  f(random_tensor({1, 8}, f32, 9));  // size 1 is always specialized
  BOOST_TEST(f.stats().recompiles == 2);
  f(random_tensor({16, 9}, f32, 9));  // dim 1 changes: one more, then it is dynamic too
  f(random_tensor({16, 12}, f32, 9));
  BOOST_TEST(f.stats().recompiles == 3);
}

BOOST_AUTO_TEST_CASE(dtype_rank_static_arg_and_requires_grad_changes_recompile) {
  // Each call changes one thing from the previous one; the reason names the change against the
  // most recent cached graph.
  auto f = compile([](const Tensor& x, double scale) { return exp(x) * scale; });
  f(random_tensor({4, 4}, f32, 1), 2.0);
  f(random_tensor({4, 4}, f64, 1), 2.0);
  f(random_tensor({4, 4, 2}, f64, 2), 2.0);
  Tensor x = random_tensor({4, 4, 2}, f64, 3);
  check_same(f(x, 3.0), exp(x) * 3.0, "new static value");
  x.requires_grad_();
  f(x, 3.0);
  {
    NoGradGuard no_grad;
    f(x, 3.0);
  }
  CompileStats s = f.stats();
  std::vector<std::string> want = {"arg 0 dtype: f32 -> f64", "arg 0 rank: 2 -> 3", "static arg 0: 2 -> 3",
                                   "arg 0 requires_grad: false -> true", "grad mode: true -> false"};
  BOOST_TEST(s.recompiles == int(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    BOOST_TEST(s.recompile_reasons.at(i).find(want[i]) == 0, s.recompile_reasons.at(i) << " vs " << want[i]);
}

BOOST_AUTO_TEST_CASE(device_guard_names_the_change) {
  Tensor x = random_tensor({2, 3}, f32, 1);
  GuardSet guards({x}, {static_shape(x.shape())}, {}, TraceModes::current(), {});
  // No GPU in this build: a tensor that only claims to live on CUDA exercises the guard.
  Tensor fake = Tensor::make_view(std::make_shared<Storage>(nullptr, 0, Device::cuda(0), nullptr), {2, 3}, {3, 1},
                                  0, f32);
  std::string why;
  BOOST_TEST(guards.check({x}, {}, &why));
  BOOST_TEST(!guards.check({fake}, {}, &why));
  BOOST_TEST(why == "arg 0 device: cpu -> cuda:0");
}

BOOST_AUTO_TEST_CASE(gradients_flow_through_a_compiled_function) {
  Tensor w = random_tensor({6, 3}, f32, 1).requires_grad_();
  auto f = compile([&](const Tensor& x) { return tanh(matmul(x, w)).sum(); });
  Tensor x = random_tensor({5, 6}, f32, 2).requires_grad_();
  f(x).backward();
  Tensor gx = x.grad(), gw = w.grad();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  tanh(matmul(x, w)).sum().backward();
  check_same(gx, x.grad(), "grad of x");
  check_same(gw, w.grad(), "grad of w");
}

BOOST_AUTO_TEST_CASE(mark_dynamic_avoids_the_first_recompile) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return a + b * 2.0; });
  Tensor a = random_tensor({6, 4}, f32, 1), b = random_tensor({6, 4}, f32, 2);
  mark_dynamic(a, 0);
  mark_dynamic(b, 0);
  f(a, b);
  Tensor a2 = random_tensor({9, 4}, f32, 3), b2 = random_tensor({9, 4}, f32, 4);
  check_same(f(a2, b2), a2 + b2 * 2.0, "new size of a marked dim");
  BOOST_TEST(f.stats().recompiles == 0);
  // add needs the two dims equal: the trace unified them into one symbol, and the guard says so.
  std::vector<std::string> guards = explain(f, a, b).guards;
  BOOST_TEST(std::count_if(guards.begin(), guards.end(), [](auto& g) { return g.find("s0 >= 2") == 0; }) == 1);
  BOOST_CHECK_THROW(f(random_tensor({5, 4}, f32, 5), random_tensor({7, 4}, f32, 6)), Error);
  BOOST_TEST(f.stats().recompile_reasons.at(0) == "arg 1 dim 0 == arg 0 dim 0: 7 != 5");
}

BOOST_AUTO_TEST_CASE(host_size_reads_specialize) {
  // The host computes a shape from x's sizes: even a dynamic dim is guarded by value then.
  auto f = compile([](const Tensor& x) { return x.reshape({x.size(0) * x.size(1)}) * 3.0; });
  Tensor x = random_tensor({4, 5}, f32, 1);
  mark_dynamic(x, 0);
  f(x);
  Tensor x2 = random_tensor({6, 5}, f32, 2);
  check_same(f(x2), x2.reshape({30}) * 3.0, "after the size changed");
  BOOST_TEST(f.stats().recompiles == 1);
  // Without a host read (flatten takes no sizes), the dim stays symbolic.
  auto g = compile([](const Tensor& x) { return x.flatten() * 3.0; }, {.dynamic = true});
  g(x);
  check_same(g(x2), x2.reshape({30}) * 3.0, "flatten, dynamic");
  BOOST_TEST(g.stats().recompiles == 0);
}

BOOST_AUTO_TEST_CASE(recompile_limit_then_eager) {
  int traced = 0;
  auto f = compile([&](const Tensor& x) { ++traced; return x * x; }, {.recompile_limit = 2, .dynamic = false});
  for (int64_t n : {2, 3, 4, 5}) {
    Tensor x = random_tensor({n}, f32, uint64_t(n));
    check_same(f(x), x * x, "n = " + std::to_string(n));
  }
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.eager_calls == 2);
  BOOST_TEST(traced == 4);  // two traces, two eager runs
}

namespace {
int branch_line = 0;
Tensor with_break(const Tensor& x) {
  Tensor s = x.sum();
  branch_line = __LINE__ + 1;
  if (s.item<float>() > 0) return exp(x) - 1.0;
  return x * 3.0;
}
Tensor with_where(const Tensor& x) { return where(gt(x.sum(), 0.0), exp(x) - 1.0, x * 3.0); }
}  // namespace

BOOST_AUTO_TEST_CASE(graph_breaks_report_reason_and_line) {
  auto f = compile([](const Tensor& x) { return with_break(x); });
  Tensor pos = random_tensor({3, 4}, f32, 1, 0.1, 1), neg = random_tensor({3, 4}, f32, 2, -1, -0.1);
  ExplainReport r = explain(f, pos);
  BOOST_TEST(r.graph_count == 2);
  BOOST_TEST(r.breaks.size() == 1u);
  BOOST_TEST(r.breaks.at(0).file == "test_compile.cpp");
  BOOST_TEST(r.breaks.at(0).line == branch_line);
  BOOST_TEST(r.breaks.at(0).reason.find("item()") == 0);
  BOOST_TEST(r.text().find("test_compile.cpp:" + std::to_string(branch_line)) != std::string::npos);
  for (int call = 0; call < 3; ++call) {  // both branches, several calls: host code re-runs each time
    check_same(f(pos), with_break(pos), "positive sum");
    check_same(f(neg), with_break(neg), "negative sum");
  }
  BOOST_TEST(f.stats().compiles == 3);  // the sum graph, and one graph per branch
  ExplainReport w = explain(compile([](const Tensor& x) { return with_where(x); }), pos);
  BOOST_TEST(w.graph_count == 1);
  BOOST_TEST(w.breaks.empty());
}

BOOST_AUTO_TEST_CASE(fullgraph_turns_a_break_into_an_error) {
  auto f = compile([](const Tensor& x) { return with_break(x); }, {.fullgraph = true, .name = "branchy"});
  check_error([&] { f(random_tensor({3}, f32, 1)); },
              {"fullgraph", "branchy", "test_compile.cpp:" + std::to_string(branch_line), "item()"});
}

BOOST_AUTO_TEST_CASE(other_breaks_and_escapes) {
  Tensor kept;
  auto f = compile([&](const Tensor& x) {
    Tensor y = x * 2.0;
    kept = y + 1.0;                      // escapes the function without being returned
    bool big = gt(y.max(), 100.0).is_nonzero();  // a branch on a value: a break
    Tensor z = y * 3.0;
    return big ? y : z.to_vector<float>().size() > 3 ? y * 2.0 : y;  // a host read: another break
  });
  Tensor x = random_tensor({5}, f32, 1);
  check_same(f(x), x * 4.0, "two breaks");
  BOOST_TEST(explain(f, x).breaks.size() == 2u);
  // kept was alive at the first break, so it became real there, and stays usable.
  check_same(kept, x * 2.0 + 1.0, "a tensor kept across a break");
  auto g = compile([&](const Tensor& x) {
    kept = x * 5.0;  // never materialized: unusable after the trace
    return x + 1.0;
  });
  g(x);
  check_error([&] { kept.sum(); }, {"sum", "tracing a compiled function", "return the tensor"});
}

BOOST_AUTO_TEST_CASE(random_ops_draw_fresh_numbers) {
  auto f = compile([](const Tensor& x) { return x + rand_like(x) + randn({4}); });
  Tensor x = random_tensor({3, 4}, f32, 1);
  manual_seed(7);
  Tensor a = f(x), b = f(x);
  BOOST_TEST(host_values(a) != host_values(b));
  manual_seed(7);
  Tensor ea = x + rand_like(x) + randn({4});
  check_same(a, ea, "same seed, same draws as eager");
  manual_seed(7);
  check_same(f(x), ea, "cached graph, same seed");
}

BOOST_AUTO_TEST_CASE(module_parameter_replacement_recompiles) {
  nn::Linear lin(4, 3);
  auto f = compile(lin);
  Tensor x = random_tensor({2, 4}, f32, 1);
  f(x);
  f(x);
  BOOST_TEST(f.stats().recompiles == 0);
  lin.weight.detach().copy_(random_tensor({3, 4}, f32, 2));  // in place: no recompile
  check_same(f(x), lin.forward(x), "after an in-place update");
  lin.bias = random_tensor({3}, f32, 3).requires_grad_();  // replaced: recompile
  check_same(f(x), lin.forward(x), "after replacing the bias");
  BOOST_TEST(f.stats().recompiles == 1);
  BOOST_TEST(f.stats().recompile_reasons.at(0) == "module parameter 'bias' was replaced");
}

BOOST_AUTO_TEST_CASE(tuple_vector_and_static_arguments) {
  auto f = compile([](std::vector<Tensor> xs, int64_t dim, bool twice) {
    Tensor c = cat(xs, dim);
    return std::make_tuple(c, twice ? c * 2.0 : c);
  });
  Tensor a = random_tensor({2, 3}, f32, 1), b = random_tensor({2, 3}, f32, 2);
  auto [c, d] = f({a, b}, 1, true);
  check_same(c, cat({a, b}, 1), "cat");
  check_same(d, cat({a, b}, 1) * 2.0, "twice");
  f({a, b}, 1, true);
  BOOST_TEST(f.stats().recompiles == 0);
  f({a, b, a}, 1, true);
  BOOST_TEST(f.stats().recompile_reasons.at(0) == "number of tensor arguments: 2 -> 3");
}

BOOST_AUTO_TEST_CASE(concurrent_calls_compile_once) {
  Tensor w = random_tensor({32, 32}, f32, 1);
  auto f = compile([&](const Tensor& x) { return gelu(matmul(x, w)).sum({1}); });
  std::vector<Tensor> inputs;
  for (int t = 0; t < 4; ++t) inputs.push_back(random_tensor({8, 32}, f32, uint64_t(100 + t)));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        std::vector<double> got = host_values(f(inputs[t])), want = host_values(gelu(matmul(inputs[t], w)).sum({1}));
        for (size_t k = 0; k < want.size(); ++k)
          if (std::abs(got[k] - want[k]) > 1e-4 * (1 + std::abs(want[k]))) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong == 0);
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 79);
}

BOOST_AUTO_TEST_CASE(reset_drops_the_cache) {
  int traced = 0;
  auto f = compile([&](const Tensor& x) { ++traced; return x + 1.0; });
  Tensor x = random_tensor({3}, f32, 1);
  f(x);
  f.reset();
  f(x);
  BOOST_TEST(traced == 2);
  BOOST_TEST(f.stats().compiles == 1);
}

BOOST_AUTO_TEST_CASE(a_compiled_function_inside_another_is_inlined) {
  auto inner = compile([](const Tensor& x) { return exp(x) * 2.0; });
  auto outer = compile([&](const Tensor& x) { return inner(x) + 1.0; });
  Tensor x = random_tensor({3, 2}, f32, 1);
  check_same(outer(x), exp(x) * 2.0 + 1.0, "nested");
  ExplainReport r = explain(outer, x);
  BOOST_TEST(r.graph_count == 1);
  BOOST_TEST(r.op_count == 5);  // exp, full, mul, full, add
  BOOST_TEST(inner.stats().compiles == 0);
}

BOOST_AUTO_TEST_CASE(mark_static_and_dynamic_false_keep_sizes_static) {
  auto f = compile([](const Tensor& x) { return x * 2.0; });
  Tensor a = random_tensor({4, 3}, f32, 1);
  mark_static(a, 0);
  f(a);
  Tensor b = random_tensor({5, 3}, f32, 2);
  mark_static(b, 0);
  f(b);  // a size change, but dim 0 is marked static: the new graph is static again
  Tensor c = random_tensor({6, 3}, f32, 3);
  mark_static(c, 0);
  check_same(f(c), c * 2.0, "third size");
  BOOST_TEST(f.stats().recompiles == 2);
  auto g = compile([](const Tensor& x) { return x * 2.0; }, {.dynamic = false});
  for (int64_t n : {2, 3, 4}) g(random_tensor({n}, f32, uint64_t(n)));
  BOOST_TEST(g.stats().recompiles == 2);
}

BOOST_AUTO_TEST_CASE(every_kind_of_host_read_breaks) {
  auto f = compile([](const Tensor& x) {
    Tensor a = x + 1.0;
    std::string printed = a.str();  // printing values
    Tensor b = a * 2.0;
    std::vector<float> v = b.to_vector<float>();
    Tensor c = b - 1.0;
    Tensor d = zeros({3});
    d.copy_(c);  // an in-place write of a traced value
    return d * float(v.size()) + float(printed.size() > 0);
  });
  Tensor x = random_tensor({3}, f32, 1);
  check_same(f(x), ((x + 1.0) * 2.0 - 1.0) * 3.0 + 1.0, "three breaks");
  ExplainReport r = explain(f, x);
  BOOST_TEST_REQUIRE(r.breaks.size() == 3u);
  BOOST_TEST(r.breaks[0].reason.find("str()") == 0);
  BOOST_TEST(r.breaks[1].reason.find("to_vector()") == 0);
  BOOST_TEST(r.breaks[2].reason.find("copy_()") == 0);
  for (const GraphBreak& b : r.breaks) BOOST_TEST(b.file == "test_compile.cpp");
}

BOOST_AUTO_TEST_CASE(grad_mode_inside_the_function_is_kept) {
  auto fn = [](const Tensor& x) {
    Tensor a = x * 2.0;
    Tensor b;
    {
      NoGradGuard no_grad;  // recorded per op: the replay must not record b either
      b = exp(x);
    }
    return (a + b).sum();
  };
  auto f = compile(fn);
  Tensor x = random_tensor({4}, f32, 1).requires_grad_();
  for (int call = 0; call < 2; ++call) {
    x.set_grad(Tensor());
    f(x).backward();
    check_close(x.grad(), std::vector<double>(4, 2.0), {4}, "d/dx of 2x + no-grad exp(x)");
  }
  BOOST_TEST(explain(f, x).graphs.at(0).find("# no grad") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_view_valid_only_at_the_traced_size_is_guarded) {
  // Found by the fuzzer: at batch 2, reshape can view the expanded tensor; at batch 5 it must
  // copy. The trace checks the view at other sizes too and guards the batch instead of failing.
  auto fn = [](const Tensor& x) { return x.expand({-1, 4}).reshape({2, -1}) * 1.0; };
  auto f = compile(fn);
  Tensor a = random_tensor({2, 1}, f32, 1);
  mark_dynamic(a, 0);
  check_same(f(a), fn(a), "traced size");
  Tensor b = random_tensor({5, 1}, f32, 2);
  check_same(f(b), fn(b), "another size");
  BOOST_TEST(f.stats().recompiles == 1);
}
