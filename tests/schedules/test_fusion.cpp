// Fusion plans (schedules/fusion.h): long runs of independent update chains (an optimizer's
// parameters) split into several pipelines, each chain whole: no pipeline reads a full-size value
// that another pipeline made, wherever the split lands; row ops read once by a pointwise op are
// inlined into it (lower_region.h: LoweredRegion::fused_row_ops).
#include "schedules/fusion.h"
#include "schedules/lower_region.h"

#include <set>

#include "dsl/op_def.h"
#include "graph/sym_shape.h"
#include "support/reference.h"

using namespace kiln;

namespace {

struct Builder {
  Graph g;
  int input(const Shape& s) {
    return g.add_input(InputKind::argument, int(g.inputs.size()), "arg" + std::to_string(g.inputs.size()),
                       {s, DType::f32, Device::cpu()}, static_shape(s), contiguous_strides(s));
  }
  int op(const char* name, const std::vector<int>& ins) { return g.add_inferred_node(op_def(name), {}, ins)[0]; }
  int scalar(double v) {
    return g.add_inferred_node(op_def("full"), {{"shape", Shape{}}, {"value", v}, {"dtype", std::string("f32")},
                                                {"device", std::string("cpu")}},
                               {})[0];
  }
};

// `chains` momentum-like updates of (p, m) from g, each `length` ops or a little more, returned
// as the graph's outputs in order.
Graph update_chains(int chains, int length) {
  Builder b;
  int lr = b.scalar(0.01), beta = b.scalar(0.9);
  for (int c = 0; c < chains; ++c) {
    int p = b.input({64, 48}), m = b.input({64, 48}), grad = b.input({64, 48});
    int decayed = b.op("mul", {p, beta});  // the chain's first op reads only inputs
    int v = b.op("add", {b.op("mul", {m, beta}), grad});
    int new_m = v;
    for (int k = 0; k < length; ++k) v = b.op(k % 2 ? "mul" : "add", {v, k % 3 ? lr : new_m});
    b.g.outputs.push_back(new_m);
    b.g.outputs.push_back(b.op("sub", {decayed, v}));
  }
  return std::move(b.g);
}

}  // namespace

BOOST_AUTO_TEST_CASE(independent_chains_split_only_where_their_values_are_dead) {
  for (int length = 3; length <= 30; ++length) {
    Graph g = update_chains(6, length);
    std::vector<PlannedStep> plan = plan_fusion(g);
    std::set<int> inputs;
    for (const GraphInput& in : g.inputs) inputs.insert(in.value);
    int regions = 0;
    for (const PlannedStep& s : plan) {
      if (s.node >= 0) continue;
      ++regions;
      for (int v : s.region.inputs) {
        bool whole = inputs.count(v) || numel(g.values[size_t(v)].meta.shape) <= 1;
        BOOST_TEST(whole, "chains of " << length << ": region " << regions - 1 << " reads %" << v
                                         << ", made by another region\n" << fusion_text(g, plan));
      }
    }
    // More than one pipeline once the chains pass the split size, and never one per op.
    int ops = 6 * (length + 4);
    BOOST_TEST((ops <= 32 || regions > 1), "chains of " << length << ": " << regions << " regions");
    BOOST_TEST(regions <= 6, "chains of " << length << ": " << regions << " regions");
  }
}

// A row op read by one pointwise op of its input's shape is not stored: its Func is inlined into
// the reader, whose schedule computes the row op's reductions (cross_entropy's backward: the
// softmax of the logits, then the one-hot subtraction; softmax's backward: the row sum of y * dy,
// then the subtraction). A row op that is a region output, or read twice, is stored as before.
BOOST_AUTO_TEST_CASE(row_ops_read_once_fuse_into_their_reader) {
  Builder b;
  Attrs last{{"dim", int64_t(-1)}};
  int logits = b.input({6, 40}), y = b.input({6, 40}), dy = b.input({6, 40});
  int p = b.g.add_inferred_node(op_def("softmax"), last, {logits})[0];
  int grad = b.op("sub", {p, b.scalar(0.25)});
  int row_sum = b.g.add_inferred_node(op_def("sum"), {{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}},
                                      {b.op("mul", {y, dy})})[0];
  int dx = b.op("mul", {y, b.op("sub", {dy, row_sum})});
  int q = b.g.add_inferred_node(op_def("softmax"), last, {y})[0];  // read twice: stored
  b.g.outputs = {grad, dx, b.op("add", {q, q}), b.op("mul", {q, b.scalar(3.0)})};
  std::vector<PlannedStep> plan = plan_fusion(b.g);
  BOOST_REQUIRE_EQUAL(plan.size(), 1u);
  LoweredRegion lowered = lower_region(b.g, plan[0].region);
  std::set<int> fused;
  for (const auto& [name, v] : lowered.fused_row_ops) fused.insert(v);
  BOOST_TEST((fused == std::set<int>{p, row_sum}));
  for (const Halide::Func& m : lowered.materialized)
    BOOST_TEST(m.name() != lowered.values.at(p).func.name());

  // Compiled on the halide backend, against eager.
  auto fn = [](const Tensor& l, const Tensor& yy, const Tensor& d) {
    Tensor s = softmax(yy, -1);
    return std::make_tuple(softmax(l, -1) - 0.25, yy * (d - (yy * d).sum({-1}, true)), s + s, s * 3.0);
  };
  auto f = compile(fn, {.backend = "halide"});
  Tensor l = kiln::test::random_tensor({6, 40}, f32, 21), yy = kiln::test::random_tensor({6, 40}, f32, 22),
         d = kiln::test::random_tensor({6, 40}, f32, 23);
  auto [g1, g2, g3, g4] = f(l, yy, d);
  auto [e1, e2, e3, e4] = fn(l, yy, d);
  kiln::test::check_close(g1, kiln::test::host_values(e1), {6, 40}, "softmax - 0.25");
  kiln::test::check_close(g2, kiln::test::host_values(e2), {6, 40}, "softmax backward");
  kiln::test::check_close(g3, kiln::test::host_values(e3), {6, 40}, "softmax read twice");
  kiln::test::check_close(g4, kiln::test::host_values(e4), {6, 40}, "softmax read twice, second reader");
}
