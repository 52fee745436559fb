// Regions of parameters only (schedules/kept_outputs.h): computed on the first call, reused while
// their parameters are unchanged, computed again after a write to one; never kept in a graph that
// writes its inputs. Values against plain loops in double after every change.
#include <filesystem>
#include <unistd.h>

#include "schedules/kept_outputs.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// x @ softmax(w, -1) in double.
std::vector<double> reference(const Tensor& x, const Tensor& w) {
  std::vector<double> xv = host_values(x), sw = along_dim(w, -1, softmax_line), out;
  int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l) acc += xv[size_t(i * k + l)] * sw[size_t(l * n + j)];
      out.push_back(acc);
    }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_region_of_parameters_is_computed_once_per_version) {
  Tensor w = random_tensor({32, 24}, f32, 1);
  std::string dir = (std::filesystem::temp_directory_path() / ("kiln-test-kept-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  set_debug_dir(dir);
  auto f = compile([&](const Tensor& x) { return matmul(x, softmax(w, -1)); }, {.backend = "halide", .name = "kept"});
  Tensor x = random_tensor({16, 32}, f32, 2);
  check_close(f(x), reference(x, w), {16, 24}, "first call");
  set_debug_dir("");
  std::string plan = dumped(dir, ".fusion.txt");
  std::filesystem::remove_all(dir);
  BOOST_TEST(plan.find("reads parameters only") != std::string::npos, plan);

  int64_t reused = kept_outputs_reused();
  Tensor x2 = random_tensor({16, 32}, f32, 3);
  check_close(f(x2), reference(x2, w), {16, 24}, "second call, softmax(w) kept");
  BOOST_TEST(kept_outputs_reused() == reused + 1);

  w.copy_(random_tensor({32, 24}, f32, 4));  // a write: the kept softmax is stale
  check_close(f(x2), reference(x2, w), {16, 24}, "after w.copy_");
  BOOST_TEST(kept_outputs_reused() == reused + 1);
  check_close(f(x), reference(x, w), {16, 24}, "next call, the new softmax(w) kept");
  BOOST_TEST(kept_outputs_reused() == reused + 2);

}

BOOST_AUTO_TEST_CASE(graphs_that_write_their_parameters_keep_nothing) {
  Tensor w = random_tensor({32, 24}, f32, 6);
  auto f = compile(
      [&](const Tensor& x) {
        Tensor y = matmul(x, softmax(w, -1));
        w.copy_(w * 0.5);
        return y;
      },
      {.backend = "halide", .name = "writes"});
  Tensor x = random_tensor({16, 32}, f32, 7);
  int64_t reused = kept_outputs_reused();
  for (int call = 0; call < 3; ++call) {
    Tensor before = w.clone();
    check_close(f(x), reference(x, before), {16, 24}, "call " + std::to_string(call));
    check_close(w, host_values(before * 0.5), {32, 24}, "w halved by call " + std::to_string(call));
  }
  BOOST_TEST(kept_outputs_reused() == reused);
}

BOOST_AUTO_TEST_CASE(autocast_weight_casts_are_kept) {
  // Under bf16 autocast each matmul casts its weight: the casts read parameters only, so they get
  // regions of their own (not the activations' casts beside them) and are kept between calls.
  Tensor w1 = random_tensor({32, 24}, f32, 8), w2 = random_tensor({24, 16}, f32, 9);
  NoGradGuard no_grad;
  AutocastGuard autocast(Device::cpu(), bf16);
  auto f = compile([&](const Tensor& x) { return matmul(relu(matmul(x, w1)), w2); }, {.backend = "halide", .name = "casts"});
  Tensor x = random_tensor({16, 32}, f32, 10);
  f(x);
  int64_t reused = kept_outputs_reused();
  Tensor got = f(x);
  BOOST_TEST(kept_outputs_reused() == reused + 1);  // one region: both weights' casts
  // The same products on bf16-rounded operands, in double.
  auto bf16_values = [](const Tensor& t) { return host_values(t.to(bf16)); };
  std::vector<double> xv = bf16_values(x), w1v = bf16_values(w1), w2v = bf16_values(w2), h(16 * 24, 0.0), want(16 * 16, 0.0);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 24; ++j) {
      for (int k = 0; k < 32; ++k) h[size_t(i * 24 + j)] += xv[size_t(i * 32 + k)] * w1v[size_t(k * 24 + j)];
      h[size_t(i * 24 + j)] = host_values(full({1}, std::max(0.0, h[size_t(i * 24 + j)])).to(bf16))[0];
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 24; ++k) want[size_t(i * 16 + j)] += h[size_t(i * 24 + k)] * w2v[size_t(k * 16 + j)];
  check_close(got.to(f32), want, {16, 16}, tolerance(bf16), "matmul(relu(matmul(x, w1)), w2) under bf16 autocast");
}
