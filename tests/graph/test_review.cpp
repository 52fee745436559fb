// Review findings for graph/ and schedules/: each case compares a compiled function with the
// same code run eagerly (or checks the error it should raise). Cases marked BUG fail today.
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

void check_same(const Tensor& compiled, const Tensor& eager, const std::string& what) {
  check_close(compiled, host_values(eager), eager.shape(), what);
}

CompileOptions halide_dynamic() {
  CompileOptions o;
  o.backend = "halide";
  o.dynamic = true;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(review)

// BUG (tracer.cpp Tracer::alias + compiled_function.cpp run): detach() inside a compiled function
// is a second symbolic tensor for the same graph value, with no node. The first call makes it real
// without autograd history, but a cache hit returns the graph's output, which has history.
BOOST_AUTO_TEST_CASE(detach_inside_compiled_function_survives_cache_hits) {
  Tensor w = random_tensor({4}, f32, 1);
  w.requires_grad_();
  auto f = compile([&](const Tensor& x) { return (x * w).detach(); });
  Tensor x = random_tensor({4}, f32, 2);
  Tensor y1 = f(x);
  BOOST_TEST(!y1.requires_grad());
  Tensor y2 = f(x);  // cache hit
  BOOST_TEST(f.stats().cache_hits == 1);
  BOOST_TEST(!y2.requires_grad(), "a detached result requires grad on the cached call");
}

// BUG (dsl/tensor.cpp copy_ + tracer): copy_ between two real tensors inside a compiled function
// is no graph break (materialize() is a no-op on real tensors), so it runs once, at trace time;
// cache hits skip it and the graph reads a stale destination.
BOOST_AUTO_TEST_CASE(copy_between_real_tensors_runs_on_every_call) {
  Tensor dst = zeros({4});
  Tensor src = random_tensor({4}, f32, 3);
  auto f = compile([&](const Tensor& x) {
    dst.copy_(src);
    return x + dst;
  });
  Tensor x = random_tensor({4}, f32, 4);
  f(x);
  src.copy_(random_tensor({4}, f32, 5));  // the function copies src on each call
  Tensor got = f(x);
  check_same(got, x + src, "second call, after src changed");
}

// BUG (sym_shape.cpp ShapeEnv::infer): slice clamps its end to the size; at the probe size
// (10007) slice(0, 0, 5) has 5 elements, which factors as the constant 5, so the output is
// recorded as static [5] although it is min(s0, 5). The guard admits any s0 >= 2; the halide
// backend sizes its output (and reads its input) as 5.
BOOST_AUTO_TEST_CASE(halide_slice_end_past_a_dynamic_size) {
  auto fn = [](const Tensor& x) { return x.slice(0, 0, 5) * 2.0; };
  auto f = compile(fn, halide_dynamic());
  Tensor a = random_tensor({10}, f32, 6);
  check_same(f(a), fn(a), "traced size");
  Tensor b = random_tensor({3}, f32, 7);
  Tensor got;
  try {
    got = f(b);
  } catch (const std::exception& e) {
    BOOST_ERROR(std::string("threw: ") + e.what());
  }
  if (got.defined()) check_same(got, fn(b), "size 3 < slice end");
}

// The same on the eager backend: sizes come from the kernels, so it holds (pins the semantics).
BOOST_AUTO_TEST_CASE(eager_slice_end_past_a_dynamic_size) {
  auto fn = [](const Tensor& x) { return x.slice(0, 0, 5) * 2.0; };
  CompileOptions o;
  o.dynamic = true;
  auto f = compile(fn, o);
  f(random_tensor({10}, f32, 6));
  Tensor b = random_tensor({3}, f32, 7);
  check_same(f(b), fn(b), "size 3 < slice end");
}

// BUG (sym_shape.cpp ShapeEnv::probe/infer): an opaque dim (s0 + 3, from cat) is probed with its
// hint, so an op on it (view({-1, 2})) factors to a static size [4, 2] although it depends on s0.
// The eager steps compute the right [5, 2]; the halide region after them takes [4, 2] as constant.
BOOST_AUTO_TEST_CASE(halide_view_of_an_opaque_dim_is_not_static) {
  Tensor y = random_tensor({3}, f32, 8);
  auto fn = [&](const Tensor& x) { return cat({x, y}).view({-1, 2}) * 2.0; };
  auto f = compile(fn, halide_dynamic());
  Tensor a = random_tensor({5}, f32, 9);
  check_same(f(a), fn(a), "traced size");
  Tensor b = random_tensor({7}, f32, 10);
  Tensor got;
  try {
    got = f(b);
  } catch (const std::exception& e) {
    BOOST_ERROR(std::string("threw: ") + e.what());
  }
  if (got.defined()) check_same(got, fn(b), "x of size 7");
}

// BUG (halide_backend.cpp HalideGraph::run): symbol values are read only off input dims that are
// exactly one symbol. After a graph break the next graph's carried input can be [s0*s1]; its
// region needs Params s0 and s1, and symbols.at() throws std::out_of_range.
BOOST_AUTO_TEST_CASE(halide_break_with_a_product_shaped_carried_input) {
  auto fn = [](const Tensor& x) {
    Tensor y = (x * 2.0).flatten();
    float total = y.sum().item<float>();  // graph break: y is carried into graph 2
    return y + double(total);
  };
  auto f = compile(fn, halide_dynamic());
  Tensor a = random_tensor({3, 4}, f32, 11);
  Tensor got;
  try {
    got = f(a);
  } catch (const std::exception& e) {
    BOOST_ERROR(std::string("threw: ") + e.what());
  }
  if (got.defined()) check_same(got, fn(a), "[s0*s1] carried");
}

// BUG (compile_graph.cpp / halide_backend.cpp): the compiled graph shares the trace's ShapeEnv,
// which keeps changing after the graph is compiled (a size read later specializes s0). The
// graph is then found by structural hash from a later trace where s0 is symbolic again; at run
// time HalideGraph::run canonicalizes through the old, mutated env: s0 is folded to the first
// trace's hint and symbols.at(s0) throws (or sizes come out as the old hint).
BOOST_AUTO_TEST_CASE(halide_graph_reused_after_its_shape_env_changed) {
  auto fn = [](const Tensor& x) {
    Tensor y = x * 2.0;
    float total = y.sum().item<float>();  // graph 1 ends here (s0 symbolic)
    Tensor z = y + double(total);
    (void)z.size(0);  // specializes s0 in the env graph 1 still points to
    return z;
  };
  auto f = compile(fn, halide_dynamic());
  Tensor a = random_tensor({8}, f32, 12);
  check_same(f(a), fn(a), "first call");
  Tensor b = random_tensor({16}, f32, 13);  // recompiles; graph 1 is found by hash
  Tensor got;
  try {
    got = f(b);
  } catch (const std::exception& e) {
    BOOST_ERROR(std::string("threw: ") + e.what());
  }
  if (got.defined()) check_same(got, fn(b), "after the recompile");
}

// BUG (tracer.cpp Tracer::call / make_symbolic): op outputs inside a trace carry no autograd
// state, so requires_grad() is false on x * w even when w requires grad; host code that branches
// on it (dropout, checkpointing, asserts) takes the other branch when compiled.
BOOST_AUTO_TEST_CASE(requires_grad_of_an_op_output_inside_a_trace) {
  Tensor w = random_tensor({4}, f32, 15);
  w.requires_grad_();
  auto fn = [&](const Tensor& x) {
    Tensor y = x * w;
    return y.requires_grad() ? y * 2.0 : y * 3.0;
  };
  auto f = compile(fn);
  Tensor x = random_tensor({4}, f32, 16);
  Tensor got = f(x);
  Tensor want = fn(x);
  check_same(got.detach(), want.detach(), "branch on requires_grad()");
}

// Was BUG (sym_shape.cpp ShapeEnv::infer): a rule that rejects the probes unified every pair of
// symbols with equal hints. x + y on square inputs needs rows equal and columns equal; unifying all
// four dims guarded x's rows == x's columns, so a non-square call recompiled.
BOOST_AUTO_TEST_CASE(square_inputs_unify_only_the_dims_the_rule_needs) {
  auto fn = [](const Tensor& x, const Tensor& y) { return x + y * 2.0; };
  auto f = compile(fn, halide_dynamic());
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {8, 5}, {3, 11}}) {
    Tensor x = random_tensor({r, c}, f32, uint64_t(r)), y = random_tensor({r, c}, f32, uint64_t(c));
    check_same(f(x, y), fn(x, y), std::to_string(r) + " x " + std::to_string(c));
  }
  BOOST_TEST(f.stats().compiles == 1, "recompiles: " << f.stats().compiles - 1);
}

BOOST_AUTO_TEST_SUITE_END()
