// Custom ops on CUDA (dsl/custom_op.h): kiln_test::bias_gelu's CUDA kernel (CUDA source compiled
// at run time with NVRTC, launched on kiln's stream) passes check_op against its CPU kernel,
// eagerly, compiled and on the tape; a CUDA kernel that computes GELU's tanh approximation
// fails the CPU against CUDA check; and a compiled training step with the op on the GPU trains
// as the same step does eagerly on the CPU.
#include "cuda/cuda_available.h"
#include "support/custom_ops.h"
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
