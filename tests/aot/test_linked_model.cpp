// A model compiled ahead of time by kiln_add_model at build time (tests/CMakeLists.txt: model
// aot_block from tests/aot/models/block_model.cpp) and linked statically: its weights load from
// the file the generator wrote, its outputs equal kiln::compile's of the same program bit for bit
// at batch sizes across the declared range, and a size outside the range is a kiln::Error; its
// raw-buffer entry point reads plain host buffers.
#include <chrono>
#include <cstring>

#include "aot/models/custom_op_model.h"
#include "aot_block.h"
#include "aot_custom_op.h"
#include "autograd/grad_mode.h"
#include "kiln.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

kiln::aot::Program make_aot_test_block();

BOOST_AUTO_TEST_CASE(linked_model_matches_compile) {
  auto t0 = std::chrono::steady_clock::now();
  aot_block::Model model(KILN_AOT_BLOCK_WEIGHTS);
  NoGradGuard no_grad;
  manual_seed(5);
  Tensor x = randn({4, 16, 32}), s = randn({4, 16, 32});
  Tensor first = model.forward(x, s);
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("aot_block: weights loaded and first call in " << first_ms << " ms");

  aot::Program p = make_aot_test_block();
  nn::load_state_dict(*p.module, KILN_AOT_BLOCK_WEIGHTS);
  auto f = compile([&](Tensor a, Tensor b) { return p.forward({a, b})[0]; }, {.backend = "halide"});
  for (int64_t batch : {4, 2, 17, 64}) {
    Tensor a = randn({batch, 16, 32}), b = randn({batch, 16, 32});
    mark_dynamic(a, 0);
    mark_dynamic(b, 0);
    Tensor got = model.forward(a, b);
    BOOST_TEST(same_bits(got, f(a, b)), "batch " << batch);
    check_close(got, host_values(p.forward({a, b})[0]), {batch, 16, 32}, tolerance(DType::f32), "eager");
  }
  BOOST_TEST(same_bits(first, model.forward(x, s)));
  check_error([&] { model.forward(randn({1, 16, 32}), randn({1, 16, 32})); },
              {"aot_block", "x dim 0 is 1", "outside its declared range 2..64"});
}

BOOST_AUTO_TEST_CASE(raw_buffer_entry_point) {
  aot_block::Model model(KILN_AOT_BLOCK_WEIGHTS);
  NoGradGuard no_grad;
  manual_seed(6);
  std::vector<float> x(3 * 16 * 32), s(3 * 16 * 32), out(3 * 16 * 32, -1.0f);
  Tensor xt = randn({3, 16, 32}), st = randn({3, 16, 32});
  std::memcpy(x.data(), xt.data_ptr(), x.size() * sizeof(float));
  std::memcpy(s.data(), st.data_ptr(), s.size() * sizeof(float));
  // Plain host buffers, innermost dim first, as Halide lays them out.
  halide_dimension_t dims[3] = {{0, 32, 1}, {0, 16, 32}, {0, 3, 16 * 32}};
  auto buffer = [&](float* data) {
    halide_buffer_t b{};
    b.host = reinterpret_cast<uint8_t*>(data);
    b.type = halide_type_t(halide_type_float, 32);
    b.dimensions = 3;
    b.dim = dims;
    return b;
  };
  halide_buffer_t bx = buffer(x.data()), bs = buffer(s.data()), bo = buffer(out.data());
  model.forward_raw(&bx, &bs, &bo);
  Tensor want = model.forward(xt, st);
  BOOST_TEST(std::memcmp(out.data(), want.data_ptr(), out.size() * sizeof(float)) == 0);
  halide_dimension_t small[3] = {{0, 31, 1}, {0, 16, 31}, {0, 3, 16 * 31}};
  halide_buffer_t wrong = bo;
  wrong.dim = small;
  check_error([&] { model.forward_raw(&bx, &bs, &wrong); }, {"output buffer 0", "[3, 16, 31]", "[3, 16, 32]"});
  halide_buffer_t ints = bx;
  ints.type = halide_type_t(halide_type_int, 32);
  check_error([&] { model.forward_raw(&ints, &bs, &bo); }, {"input x", "dtype i32", "built for f32"});
}

// A model whose graph holds a custom op (tests/aot/models/custom_op_model.cpp): the op runs as a
// step between the model's compiled regions, so the program registers it before loading the
// model, as a program that uses a PyTorch AOT package loads its custom op library first. Without
// the registration, loading is a kiln::Error that names the op.
BOOST_AUTO_TEST_CASE(a_model_with_a_custom_op_matches_compile) {
  BOOST_TEST_REQUIRE(!find_op_def("aot_test::softsign_scale"));  // nothing in this program registered it yet
  check_error([] { aot_custom_op::Model unregistered(KILN_AOT_CUSTOM_OP_WEIGHTS); },
              {"aot_test::softsign_scale", "register_op"});
  aot_test::register_aot_test_ops();
  aot_custom_op::Model model(KILN_AOT_CUSTOM_OP_WEIGHTS);
  aot::Program p = make_aot_test_custom_op();
  nn::load_state_dict(*p.module, KILN_AOT_CUSTOM_OP_WEIGHTS);
  NoGradGuard no_grad;
  manual_seed(7);
  Tensor x = randn({6, 24});
  Tensor got = model.forward(x);
  auto f = compile([&](Tensor a) { return p.forward({a})[0]; }, {.backend = "halide"});
  BOOST_TEST(same_bits(got, f(x)));
  // Against plain loops in double: relu(softsign(x W^T + b) * 1.5).
  auto& linear = dynamic_cast<nn::Linear&>(*p.module);
  std::vector<double> w = host_values(linear.weight), b = host_values(linear.bias), xs = host_values(x);
  std::vector<double> want(6 * 40);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 40; ++j) {
      double s = b[size_t(j)];
      for (int k = 0; k < 24; ++k) s += xs[size_t(i * 24 + k)] * w[size_t(j * 24 + k)];
      want[size_t(i * 40 + j)] = std::max(0.0, s / (1 + std::fabs(s)) * 1.5);
    }
  check_close(got, want, {6, 40}, tolerance(DType::f32), "against double loops");
}
