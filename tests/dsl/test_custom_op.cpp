// Custom ops (dsl/custom_op.h) eagerly and on the tape: a registered op computes what plain
// loops in double compute (gelu(x + b)), on strided inputs too; its derivative rule gives the
// gradients autograd gives the same math written with kiln's ops; and each broken registration
// or call is a kiln::Error that names the op and the rule.
#include <boost/test/unit_test.hpp>

#include "kiln.h"
#include "support/custom_ops.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<double> bias_gelu_reference(const Tensor& x, const Tensor& b) {
  std::vector<double> xs = host_values(x), bs = host_values(b), want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(gelu_reference(xs[i] + bs[i % bs.size()], "none"));
  return want;
}

CustomOp identity_spec(const char* name) {
  return {.name = name,
          .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; },
          .cpu = [](const TensorList& in, const Attrs&) { return TensorList{in[0].clone()}; }};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_custom_op_runs_eagerly_and_matches_plain_loops) {
  for (DType t : {f32, f64}) {
    Tensor x = random_tensor({5, 7}, t, 1), b = random_tensor({7}, t, 2);
    check_close(call_op(bias_gelu(), {x, b})[0], bias_gelu_reference(x, b), {5, 7}, "bias_gelu");
    // A transposed view reaches the kernel contiguous; the op is found by name too.
    Tensor xt = random_tensor({7, 5}, t, 3).transpose(0, 1);
    check_close(call_op("kiln_test::bias_gelu", {xt, b})[0], bias_gelu_reference(xt, b), {5, 7}, "of a view");
    Tensor x3 = random_tensor({2, 3, 7}, t, 4);
    check_close(call_op(bias_gelu(), {x3, b})[0], bias_gelu_reference(x3, b), {2, 3, 7}, "rank 3");
  }
  BOOST_TEST((op_def("kiln_test::bias_gelu").schedule_class == ScheduleClass::custom));
  BOOST_TEST(bias_gelu().custom != nullptr);
  BOOST_TEST(op_def("add").custom == nullptr);
}

BOOST_AUTO_TEST_CASE(a_custom_ops_derivative_rule_gives_autograds_gradients) {
  Tensor x = random_tensor({4, 6}, f64, 5).requires_grad_(), b = random_tensor({6}, f64, 6).requires_grad_();
  Tensor g = random_tensor({4, 6}, f64, 7);
  (call_op(bias_gelu(), {x, b})[0] * g).sum().backward();
  Tensor dx = x.grad(), db = b.grad();
  Tensor x2 = x.detach().requires_grad_(), b2 = b.detach().requires_grad_();
  (gelu(x2 + b2) * g).sum().backward();
  check_close(dx, host_values(x2.grad()), {4, 6}, "dx");
  check_close(db, host_values(b2.grad()), {6}, "db");
  // Only b asks for a gradient: the rule is told so and x gets none.
  Tensor b3 = b.detach().requires_grad_();
  call_op(bias_gelu(), {x.detach(), b3})[0].sum().backward();
  BOOST_TEST(b3.grad().defined());
}

BOOST_AUTO_TEST_CASE(bad_registrations_are_errors_that_name_the_rule) {
  check_error([] { register_op(identity_spec("no_namespace")); }, {"no_namespace", "namespace::op"});
  check_error([] { register_op(identity_spec("bad::na-me")); }, {"bad::na-me", "namespace::op"});
  check_error([] { register_op(identity_spec("kiln_test::bias_gelu")); },
              {"kiln_test::bias_gelu", "already registered"});
  check_error([] {
    CustomOp c = identity_spec("kiln_test::no_kernel");
    c.cpu = nullptr;
    register_op(c);
  }, {"kiln_test::no_kernel", "no kernel"});
  check_error([] {
    CustomOp c = identity_spec("kiln_test::no_shape");
    c.shape = nullptr;
    register_op(c);
  }, {"kiln_test::no_shape", "no shape rule"});
  check_error([] {
    CustomOp c = identity_spec("kiln_test::no_inputs");
    c.num_inputs = 0;
    register_op(c);
  }, {"kiln_test::no_inputs", "at least 1"});
  // The failed registrations took no name: a good one may use it.
  BOOST_TEST(register_op(identity_spec("kiln_test::no_kernel")).name == "kiln_test::no_kernel");
}

BOOST_AUTO_TEST_CASE(bad_calls_and_bad_kernels_are_errors_that_name_the_op) {
  Tensor x = random_tensor({3, 4}, f32, 8), b = random_tensor({4}, f32, 9);
  // The shape rule's own error, while tracing too (the rule runs before any kernel).
  check_error([&] { call_op(bias_gelu(), {x, random_tensor({5}, f32, 1)}); }, {"kiln_test::bias_gelu", "[5]"});
  check_error([&] { call_op(bias_gelu(), {x}); }, {"kiln_test::bias_gelu", "expected 2 inputs"});
  check_error([&] { call_op("kiln_test::not_registered", {x}); }, {"kiln_test::not_registered", "register_op"});
  // A kernel whose outputs disagree with the shape rule.
  check_error([&] { call_op(bias_gelu_wrong_shape_rule(), {x, b}); },
              {"kiln_test::bias_gelu_wrong_shape_rule", "CPU kernel", "f32[3, 4]", "shape rule says", "f32[3, 5]"});
  // A kernel that returns its input; a kernel that throws something other than kiln::Error.
  static const OpDef& returns_input = register_op({.name = "kiln_test::returns_input",
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; },
      .cpu = [](const TensorList& in, const Attrs&) { return TensorList{in[0]}; }});
  check_error([&] { call_op(returns_input, {x}); }, {"kiln_test::returns_input", "returned input 0", "clone()"});
  static const OpDef& throws = register_op({.name = "kiln_test::throws",
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; },
      .cpu = [](const TensorList&, const Attrs&) -> TensorList { throw std::runtime_error("out of paper"); }});
  check_error([&] { call_op(throws, {x}); }, {"kiln_test::throws", "CPU kernel threw", "out of paper"});
  // A CUDA-only op called on the CPU.
  static const OpDef& cuda_only = register_op({.name = "kiln_test::cuda_only",
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; },
      .cuda = [](const TensorList& in, const Attrs&) { return TensorList{in[0].clone()}; }});
  check_error([&] { call_op(cuda_only, {x}); }, {"kiln_test::cuda_only", "no CPU kernel", "CUDA"});
}

BOOST_AUTO_TEST_CASE(a_gradient_through_an_op_without_a_derivative_rule_is_an_error) {
  static const OpDef& no_rule = register_op(identity_spec("kiln_test::no_rule"));
  Tensor x = random_tensor({3}, f32, 10).requires_grad_();
  Tensor y = call_op(no_rule, {x})[0];  // forward runs, as in PyTorch
  check_error([&] { y.sum().backward(); }, {"kiln_test::no_rule", "no derivative rule", "differentiable = false"});
  // Marked non-differentiable: its output carries no gradient.
  CustomOp c = identity_spec("kiln_test::not_differentiable");
  c.differentiable = false;
  static const OpDef& nd = register_op(c);
  BOOST_TEST(!call_op(nd, {x})[0].requires_grad());
}

// A kernel over raw strided buffers: y = 2 x + b over [rows, cols] in f64, reading x and b through
// their strides (a transposed x arrives transposed, a broadcast b with stride 0) and writing the
// contiguous output kiln allocated.
BOOST_AUTO_TEST_CASE(a_raw_buffer_kernel_reads_its_inputs_in_place_and_fills_the_outputs) {
  static Strides seen;
  const OpDef& op = register_op(
      {.name = "kiln_test::raw_axpb",
       .num_inputs = 2,
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; },
       .raw_cpu = [](const std::vector<StridedBuffer>& in, const std::vector<StridedBuffer>& out, const Attrs&) {
         const StridedBuffer &x = in[0], &b = in[1], &y = out[0];
         seen = x.strides;
         auto* xp = static_cast<const double*>(x.data);
         auto* bp = static_cast<const double*>(b.data);
         auto* yp = static_cast<double*>(y.data);
         for (int64_t i = 0; i < y.shape[0]; ++i)
           for (int64_t j = 0; j < y.shape[1]; ++j)
             yp[i * y.strides[0] + j * y.strides[1]] =
                 2 * xp[i * x.strides[0] + j * x.strides[1]] + bp[i * b.strides[0] + j * b.strides[1]];
       },
       .backward = [](const TensorList&, const TensorList&, const TensorList& g, const Attrs&, const std::vector<bool>&) {
         return TensorList{g[0] * 2.0, g[0]};
       }});
  Tensor x = random_tensor({7, 5}, f64, 40).transpose(0, 1);  // [5, 7], strides [1, 5]
  Tensor b = random_tensor({7}, f64, 41).unsqueeze(0).expand({5, 7});
  std::vector<double> xs = host_values(x), bs = host_values(b), want;
  for (size_t i = 0; i < xs.size(); ++i) want.push_back(2 * xs[i] + bs[i]);
  check_close(call_op(op, {x, b})[0], want, {5, 7}, "raw_axpb");
  BOOST_TEST((seen == Strides{1, 5}));  // no copy made it contiguous
  OpCheckReport r = check_op(op, {{.inputs = {random_tensor({3, 4}, f64, 42), random_tensor({3, 4}, f64, 43)}}});
  BOOST_TEST(r.ok(), r.text());
  check_error([] {
    CustomOp c = identity_spec("kiln_test::two_cpu_kernels");
    c.raw_cpu = [](const std::vector<StridedBuffer>&, const std::vector<StridedBuffer>&, const Attrs&) {};
    register_op(c);
  }, {"kiln_test::two_cpu_kernels", "two kernels"});
}

#ifdef KILN_TEST_NVCC
// The op whose CUDA kernel nvcc built (kiln_add_cuda_kernels) links into a program that runs on a
// machine without a GPU; there its CPU kernel passes check_op, and the CUDA kernel is run by
// tests/cuda/test_custom_op.cpp where a GPU is present.
BOOST_AUTO_TEST_CASE(an_op_with_an_nvcc_built_cuda_kernel_links_and_runs_on_the_cpu) {
  Tensor x = random_tensor({5, 7}, f32, 30), b = random_tensor({7}, f32, 31);
  check_close(call_op(bias_gelu_nvcc(), {x, b})[0], bias_gelu_reference(x, b), {5, 7}, "bias_gelu_nvcc on the cpu");
  OpCheckReport r = check_op(bias_gelu_nvcc(), {{.inputs = {x, b}}});
  BOOST_TEST(r.ok(), r.text());
}
#endif
