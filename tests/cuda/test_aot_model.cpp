// CUDA models compiled ahead of time by kiln_add_model (TARGETS host-cuda) while kiln builds, on
// a machine that needs no GPU, and linked statically (tests/CMakeLists.txt: aot_block_cuda, a
// transformer block with a dynamic batch, from tests/aot/models/block_model.cpp; aot_gpt_train_cuda,
// a small GPT's whole training step with SGD and momentum, from tests/aot/models/gpt_train_model.cpp).
// On the GPU the block's outputs equal kiln::compile's of the same program on CUDA bit for bit (the
// same plan and schedules) and the CPU's within f32 tolerance; the training step's losses and
// weights follow the compiled step's within f32 tolerance (not bit for bit: the embedding's
// backward adds into the table with atomics, in an order that differs from run to run); CPU
// inputs are an error naming the device, and the raw entry point takes host buffers. Each model is given its weights from the same program the generator ran (a fixed
// seed), so the test needs no file from the build tree (tests/aot/test_linked_model.cpp loads a
// model's weights file on the CPU).
#include <chrono>
#include <cstring>

#include "aot/models/gpt_train_model.h"
#include "aot_block_cuda.h"
#include "aot_gpt_train_cuda.h"
#include "autograd/grad_mode.h"
#include "cuda/cuda_available.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

kiln::aot::Program make_aot_test_block();
kiln::aot::Program make_aot_test_gpt_train();

namespace {

// The program's weights, as the generator saved them.
std::map<std::string, Tensor> weights_of(const aot::Program& p) {
  std::vector<std::pair<std::string, Tensor>> named = aot::program_weights(p);
  return {named.begin(), named.end()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cuda_model_matches_compile_on_the_gpu, *needs_cuda()) {
  auto t0 = std::chrono::steady_clock::now();
  aot::Program cpu = make_aot_test_block();
  aot_block_cuda::Model model(weights_of(cpu));
  NoGradGuard no_grad;
  manual_seed(5);
  Tensor x = randn({4, 16, 32}), s = randn({4, 16, 32});
  std::vector<double> first = host_values(model.forward(x.to(kCuda), s.to(kCuda)));
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("aot_block_cuda: weights loaded and moved, first call (module load included) in " << first_ms
                                                                                                       << " ms");
  BOOST_TEST(model.weights().begin()->second.device() == kCuda);

  aot::Program gpu = make_aot_test_block();
  gpu.module->to(kCuda);
  auto f = compile([&](Tensor a, Tensor b) { return gpu.forward({a, b})[0]; }, {.backend = "halide"});
  for (int64_t batch : {4, 2, 17, 64}) {
    Tensor a = randn({batch, 16, 32}), b = randn({batch, 16, 32});
    Tensor ga = a.to(kCuda), gb = b.to(kCuda);
    mark_dynamic(ga, 0);
    mark_dynamic(gb, 0);
    Tensor got = model.forward(ga, gb);
    BOOST_TEST(got.device() == kCuda);
    check_close(got, host_values(cpu.forward({a, b})[0]), {batch, 16, 32}, tolerance(DType::f32),
                "against the CPU, batch " + std::to_string(batch));
    BOOST_TEST(same_bits(got, f(ga, gb)), "against kiln::compile on CUDA, batch " << batch);
  }
  BOOST_TEST(host_values(model.forward(x.to(kCuda), s.to(kCuda))) == first);
  check_error([&] { model.forward(x, s); }, {"aot_block_cuda", "input x is on cpu", "built for cuda:0"});
  check_error([&] { model.forward(randn({1, 16, 32}).to(kCuda), randn({1, 16, 32}).to(kCuda)); },
              {"x dim 0 is 1", "outside its declared range 2..64"});
}

BOOST_AUTO_TEST_CASE(a_cuda_models_raw_entry_point_takes_host_buffers, *needs_cuda()) {
  aot_block_cuda::Model model(weights_of(make_aot_test_block()));
  NoGradGuard no_grad;
  manual_seed(6);
  Tensor xt = randn({3, 16, 32}), st = randn({3, 16, 32});
  std::vector<float> out(size_t(xt.numel()), -1.0f);
  halide_dimension_t dims[3] = {{0, 32, 1}, {0, 16, 32}, {0, 3, 16 * 32}};
  auto buffer = [&](void* data) {
    halide_buffer_t b{};
    b.host = static_cast<uint8_t*>(data);
    b.type = halide_type_t(halide_type_float, 32);
    b.dimensions = 3;
    b.dim = dims;
    return b;
  };
  halide_buffer_t bx = buffer(xt.data_ptr()), bs = buffer(st.data_ptr()), bo = buffer(out.data());
  model.forward_raw(&bx, &bs, &bo);
  Tensor want = model.forward(xt.to(kCuda), st.to(kCuda)).to(Device::cpu());
  BOOST_TEST(std::memcmp(out.data(), want.data_ptr(), out.size() * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(a_cuda_training_step_matches_the_compiled_step, *needs_cuda()) {
  aot_gpt_train_cuda::Model model(weights_of(make_aot_test_gpt_train()));
  // The same GPT and AdamW on the GPU, compiled: the generator's initial weights (a fixed seed).
  auto gpt = make_aot_test_gpt();
  gpt->to(kCuda);
  auto opt = make_aot_test_optimizer(*gpt);
  auto compiled = compile(aot_test_gpt_step(gpt, opt), {.backend = "halide"});
  manual_seed(7);
  for (int i = 0; i < 4; ++i) {
    Tensor tokens = randint(0, kAotGptVocab, {4, kAotGptSeq}, {.dtype = DType::i64}).to(kCuda);
    Tensor targets = randint(0, kAotGptVocab, {4, kAotGptSeq}, {.dtype = DType::i64}).to(kCuda);
    Tensor got = model.step(tokens, targets);
    Tensor want = compiled(TensorList{tokens, targets}).at(0);
    check_close(got, host_values(want), {}, tolerance(DType::f32), "loss, step " + std::to_string(i));
  }
  std::map<std::string, Tensor> after = model.weights();
  std::vector<std::pair<std::string, Tensor>> reference = aot::program_weights({gpt, {}, {}, opt});
  BOOST_TEST(after.size() == reference.size());
  for (const auto& [name, t] : reference) {
    BOOST_TEST(after.at(name).device() == kCuda, name);
    check_close(after.at(name), host_values(t), t.shape(), tolerance(DType::f32), name);
  }
}
