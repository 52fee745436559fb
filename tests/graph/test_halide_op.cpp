// Ops defined by a Halide expression (graph/halide_op.h): eagerly and compiled they compute what
// plain loops in double compute; inside compile() they fuse with their neighbours into one kernel;
// their gradients, taken by Halide's propagate_adjoints, match the derivative worked out by hand
// (and central differences in f64), eagerly, in a compiled training step, and at second order; a
// rule given instead passes check_op and agrees with them; its definition keys the disk cache;
// and a bad definition or call is a kiln::Error that names the op.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "dsl/halide_adjoint.h"
#include "graph/halide_op.h"
#include "autograd/derivatives.h"
#include "kiln.h"
#include "schedules/region_library.h"
#include "support/graph_builder.h"
#include "support/halide_ops.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(a_halide_op_runs_eagerly_and_matches_plain_loops) {
  for (DType t : {f32, f64}) {
    Tensor x = random_tensor({5, 7}, t, 1, -3, 3), beta = random_tensor({7}, t, 2, 0.5, 2);
    std::vector<double> xs = host_values(x), bs = host_values(beta), want;
    for (size_t i = 0; i < xs.size(); ++i) want.push_back(swish_reference(xs[i], bs[i % 7]));
    check_close(call_op(swish(), {x, beta})[0], want, {5, 7}, "swish " + std::string(name(t)));
    // Another size reuses the op's compiled function (its sizes now symbolic).
    Tensor x2 = random_tensor({3, 7}, t, 3, -3, 3);
    std::vector<double> xs2 = host_values(x2), want2;
    for (size_t i = 0; i < xs2.size(); ++i) want2.push_back(swish_reference(xs2[i], bs[i % 7]));
    check_close(call_op(swish(), {x2, beta})[0], want2, {3, 7}, "another size");
  }
  // An attribute reaches the definition: clip caps the output.
  Tensor x = random_tensor({4, 7}, f32, 4, 1, 3), beta = random_tensor({7}, f32, 5, 0.5, 2);
  std::vector<double> xs = host_values(x), bs = host_values(beta), want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(xs[i] > 2 ? 2.0 : swish_reference(xs[i], bs[i % 7]));
  check_close(call_op(swish(), {x, beta}, {{"clip", 2.0}})[0], want, {4, 7}, "clip 2");
  BOOST_TEST((swish().schedule_class == ScheduleClass::pointwise));
}

BOOST_AUTO_TEST_CASE(a_halide_ops_gradient_from_propagate_adjoints_is_the_derivative) {
  Tensor x = random_tensor({6, 5}, f64, 6, -3, 3).requires_grad_(), beta = random_tensor({5}, f64, 7, 0.5, 2).requires_grad_();
  Tensor g = random_tensor({6, 5}, f64, 8);
  (call_op(swish(), {x, beta})[0] * g).sum().backward();
  std::vector<double> xs = host_values(x), bs = host_values(beta), gs = host_values(g), dx, dbeta(5, 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    dx.push_back(gs[i] * swish_dx_reference(xs[i], bs[i % 5]));
    dbeta[i % 5] += gs[i] * swish_dbeta_reference(xs[i], bs[i % 5]);
  }
  check_close(x.grad(), dx, {6, 5}, "dx");
  check_close(beta.grad(), dbeta, {5}, "dbeta, summed over the broadcast rows");
  GradcheckResult r = gradcheck([](const TensorList& in) { return call_op(swish(), in)[0]; },
                                {x.detach().requires_grad_(), beta.detach().requires_grad_()});
  BOOST_TEST(r.ok, r.message);
  // Second order: the gradient ops are Halide ops too, differentiated the same way.
  GradcheckResult r2 = gradcheck(
      [](const TensorList& in) { return call_op("kiln_test::swish_grad0", {in[0], in[1], in[2]})[0]; },
      {x.detach().requires_grad_(), beta.detach().requires_grad_(), g.requires_grad_()});
  BOOST_TEST(r2.ok, r2.message);
}

BOOST_AUTO_TEST_CASE(a_compiled_halide_op_fuses_with_its_neighbours) {
  Tensor x = random_tensor({64, 33}, f32, 9, -3, 3), beta = random_tensor({33}, f32, 10, 0.5, 2);
  auto f = compile([](Tensor a, Tensor b) { return call_op(swish(), {a * 2.0 + 1.0, b})[0] * 3.0; },
                   {.backend = "halide", .fullgraph = true, .name = "swish chain"});
  std::vector<double> xs = host_values(x), bs = host_values(beta), want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(3 * swish_reference(2 * xs[i] + 1, bs[i % 33]));
  check_close(f(x, beta), want, {64, 33}, "compiled");
  BOOST_TEST(f.stats().kernels == 1);  // the op, its producer and its consumer: one pipeline
}

BOOST_AUTO_TEST_CASE(a_compiled_training_step_through_a_halide_op_trains_as_eagerly) {
  struct Model {
    Tensor w, beta;
    Tensor loss(const Tensor& x, const Tensor& target) const {
      Tensor y = call_op(swish(), {matmul(x, w), beta})[0];
      return ((y - target) * (y - target)).mean();
    }
  };
  auto fresh = [] {
    return Model{random_tensor({6, 8}, f32, 11, -0.5, 0.5).requires_grad_(),
                 random_tensor({8}, f32, 12, 0.5, 2).requires_grad_()};
  };
  Tensor x = random_tensor({16, 6}, f32, 13), target = random_tensor({16, 8}, f32, 14);
  Model eager = fresh(), comp = fresh();
  eager.loss(x, target).backward();
  auto step = compile([&comp](Tensor a, Tensor t) {
    Tensor l = comp.loss(a, t);
    l.backward();
    return l;
  }, {.backend = "halide", .fullgraph = true, .name = "swish step"});
  check_close(step(x, target), host_values(eager.loss(x, target)), {}, "loss");
  check_close(comp.w.grad(), host_values(eager.w.grad()), {6, 8}, "w's gradient");
  check_close(comp.beta.grad(), host_values(eager.beta.grad()), {8}, "beta's gradient");
  comp.w.set_grad(Tensor());  // (a gradient to add to would hand the backward to the eager tape)
  comp.beta.set_grad(Tensor());
  ExplainReport r = explain(step, x, target);
  BOOST_TEST(r.text().find("kiln_test::swish_grad1") != std::string::npos, r.text());
}

BOOST_AUTO_TEST_CASE(check_op_passes_a_halide_op) {
  OpCheckReport r = check_op(swish(), {{.inputs = {random_tensor({4, 9}, f32, 15, -3, 3), random_tensor({9}, f32, 16, 0.5, 2)}},
                                       {.inputs = {random_tensor({2, 3, 5}, f64, 17), random_tensor({5}, f64, 18)}}});
  BOOST_TEST(r.ok(), r.text());
  BOOST_TEST(!r.passed.empty());
}

BOOST_AUTO_TEST_CASE(a_halide_op_with_its_own_derivative_rule_passes_check_op_and_agrees_with_propagate_adjoints) {
  const OpDef& op = register_halide_op(
      {.name = "kiln_test::swish_with_rule",
       .num_inputs = 2,
       .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return v[0] / (1.0f + Halide::exp(-v[1] * v[0])); },
       // s = sigmoid(beta x): dx = g (s + x beta s (1 - s)), dbeta = g x^2 s (1 - s), summed to beta's shape.
       .backward = [](const TensorList& in, const TensorList&, const TensorList& grads, const Attrs&, const std::vector<bool>&) {
         const Tensor &x = in[0], &beta = in[1], &g = grads[0];
         Tensor s = sigmoid(beta * x), ds = s * (1.0 - s);
         return TensorList{g * (s + x * beta * ds), sum_to(g * x * x * ds, beta.shape())};
       }});
  Tensor x = random_tensor({6, 5}, f64, 20, -3, 3), beta = random_tensor({5}, f64, 21, 0.5, 2), g = random_tensor({6, 5}, f64, 22);
  OpCheckReport r = check_op(op, {{.inputs = {x, beta}}, {.inputs = {x.to(f32), beta.to(f32)}}});
  BOOST_TEST(r.ok(), r.text());
  TensorList rule = {x.detach().requires_grad_(), beta.detach().requires_grad_()};
  TensorList adjoints = {x.detach().requires_grad_(), beta.detach().requires_grad_()};
  (call_op(op, rule)[0] * g).sum().backward();
  (call_op(swish(), adjoints)[0] * g).sum().backward();
  check_close(rule[0].grad(), host_values(adjoints[0].grad()), {6, 5}, "dx: the rule against propagate_adjoints");
  check_close(rule[1].grad(), host_values(adjoints[1].grad()), {5}, "dbeta: the rule against propagate_adjoints");
}

// kiln's version stamp covers its own ops' definitions, not a user's: the disk cache's key holds
// a Halide op's definition as it prints, so editing the definition under the same name compiles
// anew rather than loading the old code.
BOOST_AUTO_TEST_CASE(a_halide_ops_definition_is_part_of_the_disk_cache_key) {
  Builder b;
  int x = b.input({4, 5}), beta = b.input({5});
  b.g.outputs.push_back(b.g.add_inferred_node(swish(), {}, {x, beta})[0]);
  OpDef edited = swish(), same = swish();
  edited.pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return v[0] * v[1]; };
  Graph with_edited = b.g, with_same = b.g;
  with_edited.nodes[0].op = &edited;
  with_same.nodes[0].op = &same;
  auto key = [](const Graph& g) { return graph_key(g, "plan", {}, BackendOptions{}); };
  BOOST_TEST(key(b.g) != key(with_edited));
  BOOST_TEST(key(b.g) == key(with_same));
}

BOOST_AUTO_TEST_CASE(bad_halide_ops_are_errors_that_name_the_op) {
  check_error([] { register_halide_op({.name = "kiln_test::no_definition"}); }, {"kiln_test::no_definition", "no definition"});
  check_error([] {
    register_halide_op({.name = "kiln_test::swish", .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return v[0]; }});
  }, {"kiln_test::swish", "already registered"});
  // An integer result has no gradient: asked for one, backward says so.
  const OpDef& round_op = register_halide_op(
      {.name = "kiln_test::floor_to_int",
       .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return Halide::cast<int32_t>(Halide::floor(v[0])); },
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
         return std::vector<TensorMeta>{{in[0].shape, DType::i32, in[0].device}};
       }});
  Tensor x = random_tensor({3}, f32, 19, 0, 10);
  std::vector<double> xs = host_values(x), want;
  for (double v : xs) want.push_back(std::floor(v));
  check_close(call_op(round_op, {x})[0].to(f64), want, {3}, "floor_to_int");
  // Its derivative is refused by name: an integer value has none.
  check_error([] {
    pointwise_adjoint([](const std::vector<Halide::Expr>& v, const Attrs&) { return Halide::cast<int32_t>(v[0]); },
                      {Halide::Expr(1.5f)}, Halide::Expr(1.0f), 0, {}, "kiln_test::floor_to_int");
  }, {"kiln_test::floor_to_int", "not floating point"});
}
