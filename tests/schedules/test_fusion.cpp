// Fusion plans (schedules/fusion.h): long runs of independent update chains (an optimizer's
// parameters) split into several pipelines, each chain whole: no pipeline reads a full-size value
// that another pipeline made, wherever the split lands; row ops read once by a pointwise op are
// inlined into it (lower_region.h: LoweredRegion::fused_row_ops).
#include "schedules/fusion.h"
#include "schedules/lower_region.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "dsl/op_def.h"
#include "graph/sym_shape.h"
#include "support/graph_builder.h"
#include "support/reference.h"

using namespace kiln;
using kiln::test::Builder;

namespace {

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

// A value made from indices alone (a causal mask: ge of two unsqueezed aranges) that one region
// makes and another reads is computed again by its reader, from the aranges: not an input of
// the reader (no load of the mask) and not an output of its maker. End to end against eager.
BOOST_AUTO_TEST_CASE(index_values_are_recomputed_by_their_readers_not_loaded) {
  auto masked = [](const Tensor& x, const Tensor& w) {
    Tensor pos = arange(0, double(x.size(-1)), 1, {.dtype = DType::i64});
    Tensor mask = ge(pos.unsqueeze(1), pos.unsqueeze(0));
    Tensor p = softmax(where(mask, x, full({}, -INFINITY)), -1);
    Tensor h = matmul(p, w);  // an eager GEMM between the two readers of the mask
    return softmax(where(mask, h, full({}, -INFINITY)), -1);
  };
  // The same graph, built by hand.
  Builder b;
  int x_in = b.input({3, 16, 16}), w_in = b.input({16, 16});
  Attrs range{{"start", 0.0}, {"end", 16.0}, {"step", 1.0}, {"dtype", std::string("i64")}, {"device", std::string("cpu")}};
  int pos = b.g.add_inferred_node(op_def("arange"), range, {})[0];
  int rows = b.g.add_inferred_node(op_def("unsqueeze"), {{"dim", int64_t(1)}}, {pos})[0];
  int cols = b.g.add_inferred_node(op_def("unsqueeze"), {{"dim", int64_t(0)}}, {pos})[0];
  int mask = b.op("ge", {rows, cols});
  int p = b.g.add_inferred_node(op_def("softmax"), {{"dim", int64_t(-1)}},
                                {b.op("where", {mask, x_in, b.scalar(-INFINITY)})})[0];
  int h = b.op("matmul", {p, w_in});
  b.g.outputs = {b.g.add_inferred_node(op_def("softmax"), {{"dim", int64_t(-1)}},
                                       {b.op("where", {mask, h, b.scalar(-INFINITY)})})[0]};
  const Graph& g = b.g;
  std::vector<PlannedStep> plan = plan_fusion(g);
  int regions = 0;
  for (const PlannedStep& s : plan) {
    if (s.node >= 0) continue;
    ++regions;
    auto has = [](const std::vector<int>& vs, int v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); };
    BOOST_TEST(!has(s.region.inputs, mask), "a region loads the mask\n" << fusion_text(g, plan));
    BOOST_TEST(!has(s.region.outputs, mask), "a region stores the mask\n" << fusion_text(g, plan));
  }
  BOOST_TEST(regions == 2, fusion_text(g, plan));

  Tensor x = kiln::test::random_tensor({3, 16, 16}, f32, 31), w = kiln::test::random_tensor({16, 16}, f32, 32);
  auto f = compile(masked, {.backend = "halide"});
  kiln::test::check_close(f(x, w), kiln::test::host_values(masked(x, w)), {3, 16, 16}, "masked softmax twice");
}

// A cast that widens (bf16 -> f32) of a view, read by regions on both sides of a GEMM, is computed
// again (with its view) by each of them from the 2-byte values, never stored (under bf16 autocast the cross-entropy's f32
// cast of GPT-2's [8192, 50304] logits was a 1.6 GB tensor written by a pass of its own and read
// by the loss and its gradient). A cast that narrows (f32 -> bf16) stays stored: its readers would
// load the wider values.
BOOST_AUTO_TEST_CASE(a_widening_cast_is_recomputed_by_its_readers_a_narrowing_one_is_stored) {
  for (DType from : {DType::bf16, DType::f32}) {
    const DType to = from == DType::bf16 ? DType::f32 : DType::bf16;
    Builder b;
    int x = b.input({4, 16, 96}, from), w = b.input({96, 96}, to);
    int rows = b.g.add_inferred_node(op_def("view"), {{"shape", std::vector<int64_t>{64, 96}}}, {x})[0];
    int y = b.g.add_inferred_node(op_def("cast"), {{"dtype", std::string(name(to))}}, {rows})[0];
    int p = b.g.add_inferred_node(op_def("softmax"), {{"dim", int64_t(-1)}}, {y})[0];
    int m = b.op("matmul", {p, w});
    b.g.outputs = {b.op("add", {y, m})};
    const Graph& g = b.g;
    std::vector<PlannedStep> plan = plan_fusion(g);
    bool stored = false, recomputed = false;
    for (const PlannedStep& s : plan) {
      if (s.node >= 0) continue;
      stored = stored || std::count(s.region.outputs.begin(), s.region.outputs.end(), y);
      recomputed = recomputed || std::count(s.region.recomputed.begin(), s.region.recomputed.end(), y);
    }
    BOOST_TEST(stored == (from != DType::bf16), name(from) << " -> " << name(to) << "\n" << fusion_text(g, plan));
    BOOST_TEST(recomputed == (from == DType::bf16), fusion_text(g, plan));
  }
  // The widening cast's readers compute the same values as eager.
  auto f = [](const Tensor& x, const Tensor& w) {
    Tensor y = x.reshape({64, 96}).to(DType::f32);
    return y + matmul(softmax(y, -1), w);
  };
  Tensor x = kiln::test::random_tensor({4, 16, 96}, f32, 41).to(DType::bf16), w = kiln::test::random_tensor({96, 96}, f32, 42);
  auto compiled = compile(f, {.backend = "halide"});
  kiln::test::check_close(compiled(x, w), kiln::test::host_values(f(x, w)), {64, 96}, "bf16 cast read across a GEMM");
}

// The chain a reader recomputes may hold a one-element constant that another region reads alone
// before it (here `c`, added to the mask's columns and read by the middle region's mul): the
// maker keeps it and stores it. Every region input is then a graph input or an earlier step's
// output.
BOOST_AUTO_TEST_CASE(a_recomputed_chain_keeps_what_other_regions_read_alone) {
  Builder b;
  int x_in = b.input({3, 16, 16}), w_in = b.input({16, 16});
  Attrs range{{"start", 0.0}, {"end", 16.0}, {"step", 1.0}, {"dtype", std::string("i64")}, {"device", std::string("cpu")}};
  int relu = b.op("relu", {x_in});  // the first region's own work: it does not read the mask
  int pos = b.g.add_inferred_node(op_def("arange"), range, {})[0];
  int c = b.scalar(1.0);
  int rows = b.g.add_inferred_node(op_def("unsqueeze"), {{"dim", int64_t(1)}}, {pos})[0];
  int cols = b.op("add", {b.g.add_inferred_node(op_def("unsqueeze"), {{"dim", int64_t(0)}}, {pos})[0], c});
  int mask = b.op("ge", {rows, cols});
  int h = b.op("mul", {b.op("matmul", {relu, w_in}), c});  // the middle region reads c alone
  int h1 = b.op("matmul", {h, w_in});
  b.g.outputs = {b.g.add_inferred_node(op_def("softmax"), {{"dim", int64_t(-1)}},
                                       {b.op("where", {mask, h1, b.scalar(-INFINITY)})})[0]};
  const Graph& g = b.g;
  std::vector<PlannedStep> plan = plan_fusion(g);
  std::set<int> available;
  for (const GraphInput& in : g.inputs) available.insert(in.value);
  for (const PlannedStep& s : plan) {
    if (s.node >= 0) {
      for (int v : g.nodes[size_t(s.node)].inputs)
        BOOST_TEST(available.count(v), "eager " << g.nodes[size_t(s.node)].op->name << " reads %" << v
                                                << ", which no earlier step stores\n" << fusion_text(g, plan));
      available.insert(g.nodes[size_t(s.node)].outputs.begin(), g.nodes[size_t(s.node)].outputs.end());
      continue;
    }
    for (int v : s.region.inputs)
      BOOST_TEST(available.count(v), "a region reads %" << v << ", which no earlier step stores\n" << fusion_text(g, plan));
    available.insert(s.region.outputs.begin(), s.region.outputs.end());
  }
  BOOST_TEST(std::count_if(plan.begin(), plan.end(), [](const PlannedStep& s) { return s.node < 0; }) == 3,
             fusion_text(g, plan));
}

// Attention's v as GPT-2 makes it: a head view (slice, unflatten, transpose) of the qkv
// projection's pointwise output, copied contiguous after the q k^T GEMM. Regions form in graph
// order, so the copy first joined the region after the GEMM (the softmax's), and the projection's
// region stored the view (one copy) for the softmax's region to copy again (a second). The copy
// moves into the region its input comes from: one copy, written once, and the same values.
BOOST_AUTO_TEST_CASE(a_copy_after_a_gemm_moves_into_the_region_of_its_source) {
  auto attention = [](const Tensor& x, const Tensor& bias) {
    Tensor qkv = x + bias;  // [2, 8, 12]: q, k, v of 2 heads of 2
    auto heads = [&](int64_t at) { return qkv.slice(2, at, at + 4).unflatten(-1, {2, 2}).transpose(1, 2); };
    Tensor q = heads(0).contiguous(), k = heads(4).contiguous(), v = heads(8);
    Tensor s = softmax(matmul(q, k.transpose(-2, -1)), -1);
    return matmul(s, v.contiguous());
  };
  Builder b;
  int x = b.input({2, 8, 12}), bias = b.input({12});
  int qkv = b.op("add", {x, bias});
  auto heads = [&](int64_t at) {
    int s = b.g.add_inferred_node(op_def("slice"), {{"dim", int64_t(2)}, {"start", at}, {"end", at + 4}, {"step", int64_t(1)}}, {qkv})[0];
    int u = b.g.add_inferred_node(op_def("unflatten"), {{"dim", int64_t(-1)}, {"sizes", std::vector<int64_t>{2, 2}}}, {s})[0];
    return b.g.add_inferred_node(op_def("transpose"), {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}}, {u})[0];
  };
  int q = b.op("contiguous", {heads(0)}), k = b.op("contiguous", {heads(4)}), vh = heads(8);
  int kt = b.g.add_inferred_node(op_def("transpose"), {{"dim0", int64_t(-2)}, {"dim1", int64_t(-1)}}, {k})[0];
  int s = b.g.add_inferred_node(op_def("softmax"), {{"dim", int64_t(-1)}}, {b.op("matmul", {q, kt})})[0];
  int v = b.op("contiguous", {vh});
  b.g.outputs = {b.op("matmul", {s, v})};
  const Graph& g = b.g;
  std::vector<PlannedStep> plan = plan_fusion(g);
  int copies = 0;
  for (const PlannedStep& st : plan) {
    if (st.node >= 0) continue;
    bool makes_qkv = std::count(st.region.nodes.begin(), st.region.nodes.end(), g.values[size_t(qkv)].producer) > 0;
    for (int n : st.region.nodes)
      if (g.nodes[size_t(n)].op->name == "contiguous") {
        ++copies;
        BOOST_TEST(makes_qkv, "a copy outside the projection's region\n" << fusion_text(g, plan));
      }
    for (int o : st.region.outputs)
      BOOST_TEST(g.nodes[size_t(g.values[size_t(o)].producer)].op->name != "transpose", "a stored head view\n" << fusion_text(g, plan));
  }
  BOOST_TEST(copies == 3, fusion_text(g, plan));

  Tensor xt = kiln::test::random_tensor({2, 8, 12}, f32, 41), bt = kiln::test::random_tensor({12}, f32, 42);
  auto f = compile(attention, {.backend = "halide"});
  kiln::test::check_close(f(xt, bt), kiln::test::host_values(attention(xt, bt)), {2, 2, 8, 2}, "attention heads");
}
