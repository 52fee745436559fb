// The min-cut partition (graph/partition.h, graph/min_cut.h) and the transpose_matmuls pass: what
// the forward saves, what the backward recomputes, and that random draws are never recomputed.
// A test backend keeps the two halves it is given and runs them op by op.
#include "graph/backend.h"
#include "graph/min_cut.h"
#include "graph/passes.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

class KeepHalves final : public Backend {
 public:
  std::string_view name() const override { return "keep_halves"; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    halves.push_back(g);
    return backend("eager").compile(std::move(g), o);
  }
  static inline std::vector<std::shared_ptr<const Graph>> halves;
};

void use_keep_halves() {
  static bool done = [] {
    register_backend(std::make_shared<KeepHalves>());
    return true;
  }();
  (void)done;
  KeepHalves::halves.clear();
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const GraphNode& node : g.nodes) n += node.op->name == op;
  return n;
}

int count_inputs(const Graph& g, InputKind kind) {
  int n = 0;
  for (const GraphInput& in : g.inputs) n += in.kind == kind;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(min_cut_of_a_small_network) {
  // Two paths s->a->t (5, 2) and s->b->t (1, 4), and a->b (3): max flow 2 + 1 + min(3, 3) = 6.
  MinCut c(4);
  c.add_edge(0, 1, 5);
  c.add_edge(1, 3, 2);
  c.add_edge(0, 2, 1);
  c.add_edge(2, 3, 4);
  c.add_edge(1, 2, 3);
  BOOST_TEST(c.solve(0, 3) == 6);
  std::vector<bool> s = c.source_side();
  BOOST_TEST(s[0]);
  BOOST_TEST(!s[1]);  // s->a (2 + 3) and s->b are saturated: the cut is {s}
  BOOST_TEST(!s[2]);
  BOOST_TEST(!s[3]);
}

BOOST_AUTO_TEST_CASE(matmul_outputs_are_saved_and_pointwise_chains_recomputed) {
  use_keep_halves();
  Tensor w = random_tensor({16, 32}, DType::f32, 1).requires_grad_();
  auto f = compile([&](const Tensor& x) { return exp(tanh(matmul(x, w) * 0.5)).sum(); }, {.backend = "keep_halves"});
  Tensor x = random_tensor({8, 16}, DType::f32, 2);
  f(x).backward();
  BOOST_TEST_REQUIRE(KeepHalves::halves.size() == 2u);
  const Graph& fwd = *KeepHalves::halves[0];
  const Graph& bwd = *KeepHalves::halves[1];
  // Saved: the matmul's output (8 x 32 f32) and x (an input, free); tanh and exp run again.
  BOOST_TEST(count_inputs(bwd, InputKind::saved) == 1);
  BOOST_TEST(fwd.outputs.size() == 2u);  // the loss, then the saved matmul output
  BOOST_TEST(count_ops(bwd, "matmul") == 1);  // only w's gradient: never the forward's matmul
  BOOST_TEST(count_ops(bwd, "tanh") == 1);
  BOOST_TEST(count_ops(bwd, "exp") == 1);
  std::vector<double> want;
  {
    Tensor w2 = w.detach().clone().requires_grad_();
    exp(tanh(matmul(x, w2) * 0.5)).sum().backward();
    want = host_values(w2.grad());
  }
  check_close(w.grad(), want, {16, 32}, {1e-4, 1e-6}, "w.grad");
}

BOOST_AUTO_TEST_CASE(random_draws_are_saved_never_drawn_again) {
  use_keep_halves();
  Tensor w = random_tensor({64}, DType::f32, 3).requires_grad_();
  auto f = compile([&](const Tensor& x) { return (x * w * lt(rand_like(x), 0.5).to(DType::f32)).sum(); },
                   {.backend = "keep_halves"});
  Tensor x = random_tensor({64}, DType::f32, 4);
  manual_seed(7);
  f(x).backward();
  BOOST_TEST_REQUIRE(KeepHalves::halves.size() == 2u);
  const Graph& bwd = *KeepHalves::halves[1];
  for (const GraphNode& n : bwd.nodes) BOOST_TEST(!n.op->random, n.op->name << " in the backward");
  BOOST_TEST(count_inputs(bwd, InputKind::saved) >= 1);
  manual_seed(7);
  Tensor mask = lt(rand_like(x), 0.5).to(DType::f32);
  check_close(w.grad(), host_values(x * mask), {64}, "w.grad with the forward's draw");
}

BOOST_AUTO_TEST_CASE(a_transposed_matmul_becomes_the_matmul_of_transposes) {
  Tensor a = random_tensor({4, 6}, DType::f32, 5), b = random_tensor({6, 3}, DType::f32, 6);
  Graph g;
  auto in = [&](const Tensor& t, int i) {
    return g.add_input(InputKind::argument, i, "arg" + std::to_string(i), {t.shape(), t.dtype(), t.device()},
                       static_shape(t.shape()), t.strides());
  };
  int va = in(a, 0), vb = in(b, 1);
  int m = g.add_inferred_node(op_def("matmul"), {}, {va, vb})[0];
  int t = g.add_inferred_node(op_def("transpose"), {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}}, {m})[0];
  g.outputs = {t};
  BOOST_TEST(transpose_matmuls(g) == 1);
  BOOST_TEST(count_ops(g, "matmul") == 1);
  const Value& out = g.values[size_t(g.outputs[0])];
  BOOST_TEST(g.nodes[size_t(out.producer)].op->name == "matmul");  // no transpose after it
  BOOST_TEST(out.meta.shape == (Shape{3, 4}));
  Tensor got = backend("eager").compile(std::make_shared<Graph>(g), {})->run({a, b})[0];
  check_close(got, host_values(matmul(a, b).t()), {3, 4}, "(a b)^T");
  // Read by someone else too: left alone (it would compute the product twice).
  Graph h;
  std::swap(g, h);
  va = in(a, 0), vb = in(b, 1);
  m = g.add_inferred_node(op_def("matmul"), {}, {va, vb})[0];
  t = g.add_inferred_node(op_def("transpose"), {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}}, {m})[0];
  g.outputs = {t, m};
  BOOST_TEST(transpose_matmuls(g) == 0);
}
