// Halide ops over whole tensors (graph/halide_op.h's `define`): a stencil that reads its
// neighbours (blur_rows, edges repeated) and a reduction over an RDom (weighted_sumsq). Eagerly and
// compiled they compute what plain loops in double compute; inside compile() they are a stage of
// their neighbours' pipeline; their gradients, from Halide's propagate_adjoints (gathers where
// Halide inverts a read, scatters at the clamped edges and into the reduction's weights), match the
// derivatives worked out by hand and central differences in f64, eagerly and in a compiled
// training step; they pass check_op; their definitions key the disk cache whatever Halide named
// their Funcs; and a bad definition is a kiln::Error that names the op.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "dsl/halide_def.h"
#include "graph/halide_op.h"
#include "kiln.h"
#include "schedules/region_library.h"
#include "support/graph_builder.h"
#include "support/halide_ops.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(halide_ops_over_tensors_run_eagerly_and_match_plain_loops) {
  for (DType t : {f32, f64}) {
    for (Shape s : {Shape{5, 7}, Shape{2, 3, 9}, Shape{4, 1}}) {
      Tensor x = random_tensor(s, t, 1, -3, 3);
      check_close(call_op(blur_rows(), {x})[0], blur_rows_reference(host_values(x), s.back()), s,
                  "blur_rows " + to_string(s) + " " + std::string(name(t)));
    }
    Tensor x = random_tensor({6, 11}, t, 2, -2, 2), w = random_tensor({11}, t, 3, 0, 2);
    check_close(call_op(weighted_sumsq(), {x, w})[0], weighted_sumsq_reference(host_values(x), host_values(w)), {6},
                "weighted_sumsq " + std::string(name(t)));
    // Rows long enough for the CPU schedule's vector partial sums (schedules/custom_schedule.h).
    Tensor xl = random_tensor({5, 700}, t, 26), wl = random_tensor({700}, t, 27, 0, 2);
    check_close(call_op(weighted_sumsq(), {xl, wl})[0], weighted_sumsq_reference(host_values(xl), host_values(wl)), {5},
                "weighted_sumsq, long rows");
    // Another size: the op's compiled function again, its sizes now symbolic.
    Tensor x2 = random_tensor({3, 4}, t, 4), w2 = random_tensor({4}, t, 5, 0, 2);
    check_close(call_op(weighted_sumsq(), {x2, w2})[0], weighted_sumsq_reference(host_values(x2), host_values(w2)), {3},
                "weighted_sumsq, another size");
  }
  BOOST_TEST((blur_rows().schedule_class == ScheduleClass::custom));
  BOOST_TEST(bool(blur_rows().define));
}

BOOST_AUTO_TEST_CASE(a_compiled_halide_op_over_tensors_is_a_stage_of_its_neighbours_pipeline) {
  Tensor x = random_tensor({16, 40}, f32, 6, -3, 3), w = random_tensor({40}, f32, 7, 0, 2);
  auto f = compile([](Tensor a, Tensor b) {
    Tensor blurred = call_op(blur_rows(), {a * 2.0 + 1.0})[0];
    return call_op(weighted_sumsq(), {blurred * 0.5, b})[0] + 1.0;
  }, {.backend = "halide", .fullgraph = true, .name = "blur sumsq chain"});
  std::vector<double> xs = host_values(x), ws = host_values(w);
  for (double& v : xs) v = 2 * v + 1;
  std::vector<double> blurred = blur_rows_reference(xs, 40);
  for (double& v : blurred) v *= 0.5;
  std::vector<double> want = weighted_sumsq_reference(blurred, ws);
  for (double& v : want) v += 1;
  check_close(f(x, w), want, {16}, "compiled");
  BOOST_TEST(f.stats().kernels == 1);  // both ops, their producers and their consumer: one pipeline
}

BOOST_AUTO_TEST_CASE(gradients_from_propagate_adjoints_are_the_derivatives) {
  // blur_rows: each output spreads g/3 to its three reads (an edge read twice gets 2g/3).
  Tensor x = random_tensor({3, 6}, f64, 8, -2, 2).requires_grad_(), g = random_tensor({3, 6}, f64, 9);
  (call_op(blur_rows(), {x})[0] * g).sum().backward();
  std::vector<double> gs = host_values(g), dx(gs.size(), 0.0);
  for (size_t row = 0; row < gs.size(); row += 6)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t k : {std::max<int64_t>(j - 1, 0), j, std::min<int64_t>(j + 1, 5)}) dx[row + size_t(k)] += gs[row + size_t(j)] / 3;
  check_close(x.grad(), dx, {3, 6}, "blur_rows dx");
  // weighted_sumsq: dx = 2 g x w, dw = sum over rows of g x^2.
  Tensor y = random_tensor({4, 5}, f64, 10, -2, 2).requires_grad_(), w = random_tensor({5}, f64, 11, 0, 2).requires_grad_();
  Tensor gy = random_tensor({4}, f64, 12);
  (call_op(weighted_sumsq(), {y, w})[0] * gy).sum().backward();
  std::vector<double> ys = host_values(y), ws = host_values(w), gys = host_values(gy), dy, dw(5, 0.0);
  for (size_t i = 0; i < ys.size(); ++i) {
    dy.push_back(2 * gys[i / 5] * ys[i] * ws[i % 5]);
    dw[i % 5] += gys[i / 5] * ys[i] * ys[i];
  }
  check_close(y.grad(), dy, {4, 5}, "weighted_sumsq dx");
  check_close(w.grad(), dw, {5}, "weighted_sumsq dw (a scatter over the rows)");
  // Long rows: the forward's sums in vector partials, differentiated the same way.
  GradcheckResult long_rows = gradcheck([](const TensorList& t) { return call_op(weighted_sumsq(), t)[0]; },
                                        {random_tensor({2, 260}, f64, 28).requires_grad_(), random_tensor({260}, f64, 29, 0, 2).requires_grad_()});
  BOOST_TEST(long_rows.ok, long_rows.message);
  for (const OpDef* op : {&blur_rows(), &weighted_sumsq()}) {
    TensorList in = op == &blur_rows() ? TensorList{random_tensor({3, 7}, f64, 13).requires_grad_()}
                                       : TensorList{random_tensor({3, 7}, f64, 14).requires_grad_(),
                                                    random_tensor({7}, f64, 15, 0, 2).requires_grad_()};
    GradcheckResult r = gradcheck([op](const TensorList& t) { return call_op(*op, t)[0]; }, in);
    BOOST_TEST(r.ok, op->name + ": " + r.message);
  }
}

BOOST_AUTO_TEST_CASE(a_compiled_training_step_through_halide_ops_over_tensors_trains_as_eagerly) {
  struct Model {
    Tensor w, scale;
    Tensor loss(const Tensor& x) const {
      Tensor h = call_op(blur_rows(), {matmul(x, w)})[0];
      return call_op(weighted_sumsq(), {h, scale})[0].mean();
    }
  };
  auto fresh = [] {
    return Model{random_tensor({6, 12}, f32, 16, -0.5, 0.5).requires_grad_(), random_tensor({12}, f32, 17, 0.5, 2).requires_grad_()};
  };
  Tensor x = random_tensor({10, 6}, f32, 18);
  Model eager = fresh(), comp = fresh();
  Tensor want = eager.loss(x);
  want.backward();
  auto step = compile([&comp](Tensor a) {
    Tensor l = comp.loss(a);
    l.backward();
    return l;
  }, {.backend = "halide", .fullgraph = true, .name = "blur sumsq step"});
  check_close(step(x), host_values(want), {}, "loss");
  check_close(comp.w.grad(), host_values(eager.w.grad()), {6, 12}, "w's gradient");
  check_close(comp.scale.grad(), host_values(eager.scale.grad()), {12}, "scale's gradient");
  comp.w.set_grad(Tensor());
  comp.scale.set_grad(Tensor());
  ExplainReport r = explain(step, x);
  BOOST_TEST(r.breaks.empty(), r.text());
  BOOST_TEST(r.text().find("kiln_test::weighted_sumsq_grad1") != std::string::npos, r.text());
}

BOOST_AUTO_TEST_CASE(check_op_passes_halide_ops_over_tensors) {
  OpCheckReport blur = check_op(blur_rows(), {{.inputs = {random_tensor({4, 9}, f32, 19, -3, 3)}},
                                              {.inputs = {random_tensor({2, 3, 5}, f64, 20)}}});
  BOOST_TEST(blur.ok(), blur.text());
  OpCheckReport sumsq = check_op(weighted_sumsq(), {{.inputs = {random_tensor({5, 8}, f32, 21), random_tensor({8}, f32, 22, 0, 2)}},
                                                    {.inputs = {random_tensor({3, 4}, f64, 23), random_tensor({4}, f64, 24, 0, 2)}}});
  BOOST_TEST(sumsq.ok(), sumsq.text());
  BOOST_TEST(std::count_if(sumsq.passed.begin(), sumsq.passed.end(), [](const std::string& p) { return p.rfind("gradcheck", 0) == 0; }) == 2,
             sumsq.text());
}

// The definition prints into the disk cache's key with Halide's generated names numbered as they
// appear: Funcs made before it (another op, another compile) change those names, not the key.
BOOST_AUTO_TEST_CASE(a_definition_over_tensors_keys_the_disk_cache_whatever_halide_named_its_funcs) {
  Builder b;
  int x = b.input({4, 5});
  b.g.outputs.push_back(b.g.add_inferred_node(blur_rows(), {}, {x})[0]);
  auto key = [](const Graph& g) { return graph_key(g, "plan", {}, BackendOptions{}); };
  std::string first = key(b.g);
  for (int i = 0; i < 3; ++i) Halide::Func unrelated;  // moves Halide's name counters on
  Halide::RDom also(0, 4);
  BOOST_TEST(key(b.g) == first);
  OpDef edited = blur_rows();
  edited.define = [](const std::vector<HalideTensor>& in, const Attrs&) {
    std::vector<Halide::Var> v = halide_vars(in[0].rank());
    Halide::Func f;
    f(v) = in[0].func(v) * 2.0f;
    return std::vector<HalideTensor>{{f, in[0].shape, in[0].dtype}};
  };
  Graph with_edited = b.g;
  with_edited.nodes[0].op = &edited;
  BOOST_TEST(key(with_edited) != first);
}

BOOST_AUTO_TEST_CASE(bad_halide_ops_over_tensors_are_errors_that_name_the_op) {
  HalideDef copy = [](const std::vector<HalideTensor>& in, const Attrs&) { return in; };
  check_error([&] { register_halide_op({.name = "kiln_test::no_rule", .define = copy}); },
              {"kiln_test::no_rule", "needs a shape rule"});
  check_error([&] {
    register_halide_op({.name = "kiln_test::two_definitions",
                        .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return v[0]; },
                        .define = copy,
                        .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; }});
  }, {"kiln_test::two_definitions", "two definitions"});
  // A definition whose output disagrees with the shape rule: a 1-D Func where the rule says 2-D.
  const OpDef& flat = register_halide_op(
      {.name = "kiln_test::flat_output",
       .define = [](const std::vector<HalideTensor>& in, const Attrs&) {
         Halide::Var i;
         Halide::Func f;
         f(i) = in[0].func(i, 0);
         return std::vector<HalideTensor>{{f, {in[0].dim(1)}, in[0].dtype}};
       },
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; }});
  check_error([&] { call_op(flat, {random_tensor({3, 4}, f32, 25)}); }, {"kiln_test::flat_output", "shape rule"});
}
