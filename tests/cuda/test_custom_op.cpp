// Custom ops on CUDA (dsl/custom_op.h): kiln_test::bias_gelu's CUDA kernel (CUDA source compiled
// at run time with NVRTC, launched on kiln's stream) passes check_op against its CPU kernel,
// eagerly, compiled and on the tape; a CUDA kernel that computes GELU's tanh approximation
// fails the CPU against CUDA check; and a compiled training step with the op on the GPU trains
// as the same step does eagerly on the CPU. The same op with its kernel compiled by nvcc through
// kiln_add_cuda_kernels (where the build found nvcc) passes check_op too. A Halide op (graph/halide_op.h) runs on CUDA through
// the pipeline compiled from its definition, fuses with its neighbours into one kernel, and its
// propagate_adjoints gradients match the derivative in double.
#include "cuda/cuda_available.h"
#include "support/custom_ops.h"
#include "support/halide_ops.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<OpSample> cuda_samples() {
  return {{.inputs = to_cuda({random_tensor({64, 96}, f32, 1), random_tensor({96}, f32, 2)})},
          {.inputs = to_cuda({random_tensor({3, 5, 33}, f64, 3), random_tensor({33}, f64, 4)})}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cuda_custom_op_passes_check_op_against_its_cpu_kernel, *needs_cuda()) {
  OpCheckReport r = check_op(bias_gelu(), cuda_samples());
  BOOST_TEST_MESSAGE(r.text());
  BOOST_TEST(r.ok(), r.text());
  for (int s = 0; s < 2; ++s) {
    std::string want = "cpu_vs_cuda (sample " + std::to_string(s) + ")";
    BOOST_TEST((std::find(r.passed.begin(), r.passed.end(), want) != r.passed.end()), want << " did not pass");
  }
}

#ifdef KILN_TEST_NVCC
BOOST_AUTO_TEST_CASE(a_custom_op_with_an_nvcc_built_kernel_passes_check_op_against_its_cpu_kernel, *needs_cuda()) {
  OpCheckReport r = check_op(bias_gelu_nvcc(), cuda_samples());
  BOOST_TEST_MESSAGE(r.text());
  BOOST_TEST(r.ok(), r.text());
  BOOST_TEST((std::find(r.passed.begin(), r.passed.end(), "cpu_vs_cuda (sample 0)") != r.passed.end()));
}
#endif

BOOST_AUTO_TEST_CASE(a_cuda_kernel_that_disagrees_with_the_cpu_fails_check_op, *needs_cuda()) {
  OpCheckReport r = check_op(bias_gelu_cuda_disagrees(), cuda_samples());
  BOOST_TEST_MESSAGE(r.text());
  BOOST_TEST(r.failed("cpu_vs_cuda"));
  BOOST_TEST(!r.failed("shape_rule"));
}

BOOST_AUTO_TEST_CASE(a_compiled_cuda_step_with_a_custom_op_trains_as_the_cpu_does_eagerly, *needs_cuda()) {
  auto make = [](Device d) {
    TensorList p = {random_tensor({32, 48}, f32, 5, -0.3, 0.3).to(d), random_tensor({48}, f32, 6).to(d)};
    for (Tensor& t : p) t.requires_grad_();
    return p;
  };
  TensorList cpu = make(Device::cpu()), gpu = make(kCuda);
  optim::SGD cpu_opt(cpu, {.lr = 0.05}), gpu_opt(gpu, {.lr = 0.05});
  Tensor x = random_tensor({128, 32}, f32, 7), target = random_tensor({128, 48}, f32, 8);
  auto loss_of = [](const TensorList& p, const Tensor& a, const Tensor& t) {
    Tensor y = call_op(bias_gelu(), {matmul(a, p[0]), p[1]})[0];
    return ((y - t) * (y - t)).mean();
  };
  auto step = compile(
      [&](Tensor a, Tensor t) {
        Tensor loss = loss_of(gpu, a, t);
        loss.backward();
        gpu_opt.step();
        gpu_opt.zero_grad();
        return loss;
      },
      {.backend = "halide", .fullgraph = true, .name = "cuda custom op step"});
  Tensor xg = x.to(kCuda), tg = target.to(kCuda);
  for (int i = 0; i < 3; ++i) {
    Tensor want = loss_of(cpu, x, target);
    want.backward();
    cpu_opt.step();
    cpu_opt.zero_grad();
    check_close(step(xg, tg), host_values(want), {}, {1e-4, 1e-5}, "loss of step " + std::to_string(i));
  }
  check_close(gpu[1], host_values(cpu[1]), {48}, {1e-4, 1e-5}, "the custom op's bias after 3 steps");
}

BOOST_AUTO_TEST_CASE(a_halide_op_runs_fuses_and_differentiates_on_cuda, *needs_cuda()) {
  Tensor x = random_tensor({256, 96}, f32, 9, -3, 3), beta = random_tensor({96}, f32, 10, 0.5, 2);
  std::vector<double> xs = host_values(x), bs = host_values(beta), want, chained;
  for (size_t i = 0; i < xs.size(); ++i) {
    want.push_back(swish_reference(xs[i], bs[i % 96]));
    chained.push_back(3 * swish_reference(2 * xs[i] + 1, bs[i % 96]));
  }
  Tensor gx = x.to(kCuda), gbeta = beta.to(kCuda);
  check_close(call_op(swish(), {gx, gbeta})[0].to(Device::cpu()), want, {256, 96}, "eager on cuda");
  auto f = compile([](Tensor a, Tensor b) { return call_op(swish(), {a * 2.0 + 1.0, b})[0] * 3.0; },
                   {.backend = "halide", .fullgraph = true, .name = "swish chain on cuda"});
  check_close(f(gx, gbeta).to(Device::cpu()), chained, {256, 96}, "compiled on cuda");
  BOOST_TEST(f.stats().kernels == 1);
  Tensor g = random_tensor({256, 96}, f32, 11);
  Tensor dx = gx.detach().requires_grad_(), db = gbeta.detach().requires_grad_();
  (call_op(swish(), {dx, db})[0] * g.to(kCuda)).sum().backward();
  std::vector<double> gs = host_values(g), want_dx, want_db(96, 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    want_dx.push_back(gs[i] * swish_dx_reference(xs[i], bs[i % 96]));
    want_db[i % 96] += gs[i] * swish_dbeta_reference(xs[i], bs[i % 96]);
  }
  check_close(dx.grad().to(Device::cpu()), want_dx, {256, 96}, "dx on cuda");
  check_close(db.grad().to(Device::cpu()), want_db, {96}, "dbeta on cuda");
  OpCheckReport r = check_op(swish(), {{.inputs = {gx, gbeta}}});
  BOOST_TEST(r.ok(), r.text());
}

// Halide ops over whole tensors on CUDA: the stencil and the reduction as one pipeline's stages
// (the generic custom schedule: a thread per element, the reduction's updates a thread per row;
// tests/schedules/test_gpu_schedule.cpp checks that every stage is on the device),
// and their propagate_adjoints gradients (the scatters at the edges and into the weights as
// atomic adds) against the CPU's, and check_op with its CPU-against-CUDA check.
BOOST_AUTO_TEST_CASE(halide_ops_over_tensors_run_fuse_and_differentiate_on_cuda, *needs_cuda()) {
  Tensor x = random_tensor({512, 300}, f32, 12, -2, 2), w = random_tensor({300}, f32, 13, 0, 2);
  std::vector<double> blurred = blur_rows_reference(host_values(x), 300);
  std::vector<double> want = weighted_sumsq_reference(blurred, host_values(w));
  Tensor gx = x.to(kCuda), gw = w.to(kCuda);
  check_close(call_op(blur_rows(), {gx})[0].to(Device::cpu()), blurred, {512, 300}, "blur_rows eager on cuda");
  auto f = compile([](Tensor a, Tensor b) { return call_op(weighted_sumsq(), {call_op(blur_rows(), {a})[0], b})[0]; },
                   {.backend = "halide", .fullgraph = true, .name = "blur sumsq on cuda"});
  check_close(f(gx, gw).to(Device::cpu()), want, {512}, "compiled on cuda");
  Tensor g = random_tensor({512}, f32, 14);
  auto grads = [&](Tensor a, Tensor b, Tensor gy) {
    Tensor da = a.detach().requires_grad_(), db = b.detach().requires_grad_();
    (call_op(weighted_sumsq(), {call_op(blur_rows(), {da})[0], db})[0] * gy).sum().backward();
    return TensorList{da.grad().to(Device::cpu()), db.grad().to(Device::cpu())};
  };
  TensorList cpu = grads(x, w, g), gpu = grads(gx, gw, g.to(kCuda));
  check_close(gpu[0], host_values(cpu[0]), {512, 300}, {1e-4, 1e-5}, "dx on cuda against the cpu");
  check_close(gpu[1], host_values(cpu[1]), {300}, {1e-4, 1e-4}, "dw on cuda (atomic adds) against the cpu");
  // check_op's gradcheck runs on the CPU in f64, an element at a time: a small sample.
  Tensor sx = random_tensor({16, 40}, f32, 15).to(kCuda), sw = random_tensor({40}, f32, 16, 0, 2).to(kCuda);
  OpCheckReport blur = check_op(blur_rows(), {{.inputs = {sx}}});
  BOOST_TEST(blur.ok(), blur.text());
  OpCheckReport sumsq = check_op(weighted_sumsq(), {{.inputs = {sx, sw}}});
  BOOST_TEST(sumsq.ok(), sumsq.text());
}
