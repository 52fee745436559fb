// check_op (graph/check_op.h) on custom ops (dsl/custom_op.h): a correct op passes every check;
// an op with a wrong shape rule, a wrong derivative rule or a kernel that writes its input fails
// the check that names it. A custom op inside a compiled training step is one step between the
// compiled pipelines (no graph break), also from the disk cache, and trains as it does eagerly.
#include <boost/test/unit_test.hpp>

#include "graph/check_op.h"
#include "kiln.h"
#include "support/custom_ops.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<OpSample> bias_gelu_samples() {
  return {{.inputs = {random_tensor({5, 7}, f32, 1), random_tensor({7}, f32, 2)}},
          {.inputs = {random_tensor({2, 3, 4}, f64, 3), random_tensor({4}, f64, 4)}}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_correct_custom_op_passes_every_check) {
  OpCheckReport r = check_op(bias_gelu(), bias_gelu_samples());
  BOOST_TEST_MESSAGE(r.text());
  BOOST_TEST(r.ok(), r.text());
  for (const char* check : {"shape_rule", "no_input_writes", "compiled", "compiled_dynamic", "autograd", "gradcheck"})
    for (int s = 0; s < 2; ++s) {
      std::string want = std::string(check) + " (sample " + std::to_string(s) + ")";
      BOOST_TEST((std::find(r.passed.begin(), r.passed.end(), want) != r.passed.end()), want << " did not pass");
    }
}

BOOST_AUTO_TEST_CASE(each_broken_registration_fails_the_check_that_names_it) {
  OpCheckReport shape = check_op(bias_gelu_wrong_shape_rule(), bias_gelu_samples());
  BOOST_TEST_MESSAGE(shape.text());
  BOOST_TEST(shape.failed("shape_rule"));
  BOOST_TEST(shape.text().find("shape rule says") != std::string::npos);

  OpCheckReport grad = check_op(bias_gelu_wrong_gradient(), bias_gelu_samples());
  BOOST_TEST_MESSAGE(grad.text());
  BOOST_TEST(grad.failed("gradcheck"));
  BOOST_TEST(!grad.failed("shape_rule"));
  BOOST_TEST(!grad.failed("compiled"));

  OpCheckReport writes = check_op(bias_gelu_writes_its_input(), bias_gelu_samples());
  BOOST_TEST_MESSAGE(writes.text());
  BOOST_TEST(writes.failed("no_input_writes"));
  BOOST_TEST(writes.text().find("input 0") != std::string::npos);
}

namespace {

// A linear layer, then the custom op, then a loss: one SGD step, returning the loss.
struct Model {
  Tensor w, b, bias;
  std::shared_ptr<optim::SGD> opt;
  Model(Tensor w_, Tensor b_, Tensor bias_) : w(w_), b(b_), bias(bias_) {
    opt = std::make_shared<optim::SGD>(std::vector<Tensor>{w, b, bias}, optim::SGDOptions{.lr = 0.1});
  }
  Tensor step(const Tensor& x, const Tensor& target) {
    Tensor h = matmul(x, w) + b;
    Tensor y = call_op(bias_gelu(), {h, bias})[0];
    Tensor loss = ((y - target) * (y - target)).mean();
    loss.backward();
    opt->step();
    opt->zero_grad();
    return loss;
  }
};

Model fresh_model() {
  return {random_tensor({6, 8}, f32, 11, -0.5, 0.5).requires_grad_(), random_tensor({8}, f32, 12).requires_grad_(),
          random_tensor({8}, f32, 13).requires_grad_()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_compiled_training_step_with_a_custom_op_has_no_break_and_trains_as_eagerly) {
  Tensor x = random_tensor({16, 6}, f32, 14), target = random_tensor({16, 8}, f32, 15);
  Model eager = fresh_model(), comp = fresh_model();
  auto step = compile([&comp](Tensor a, Tensor t) { return comp.step(a, t); },
                      {.backend = backend_under_test(), .fullgraph = true, .name = "custom op step"});
  for (int i = 0; i < 3; ++i) {
    Tensor want = eager.step(x, target);
    check_close(step(x, target), host_values(want), {}, "loss of step " + std::to_string(i));
  }
  check_close(comp.bias, host_values(eager.bias), {8}, "the custom op's bias after 3 steps");
  check_close(comp.w, host_values(eager.w), {6, 8}, "w after 3 steps");
  ExplainReport r = explain(step, x, target);  // (runs a fourth step)
  BOOST_TEST(r.graph_count == 1);
  BOOST_TEST(r.breaks.empty());
  BOOST_TEST(r.text().find("kiln_test::bias_gelu") != std::string::npos);
  // A second function of the same step: its graphs come from the disk cache, custom op included.
  Model again = fresh_model();
  auto step2 = compile([&again](Tensor a, Tensor t) { return again.step(a, t); },
                       {.backend = backend_under_test(), .fullgraph = true, .name = "custom op step again"});
  Model eager2 = fresh_model();
  check_close(step2(x, target), host_values(eager2.step(x, target)), {}, "the step from the disk cache");
}
