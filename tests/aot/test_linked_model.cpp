// A model compiled ahead of time by kiln_add_model at build time (tests/CMakeLists.txt: model
// aot_block from tests/aot/models/block_model.cpp) and linked statically: its weights load from
// the file the generator wrote, its outputs equal kiln::compile's of the same program bit for bit
// at batch sizes across the declared range, and a size outside the range is a kiln::Error; its
// raw-buffer entry point reads plain host buffers.
#include <chrono>
#include <cstring>

#include "aot_block.h"
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
