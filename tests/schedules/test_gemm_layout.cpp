// GEMM layouts on the CPU (schedules/gemm_layout.h): a matmul's transposed operand is copied dense
// where it is made, flattened leading dims included (a weight gradient's dy^T), a right operand
// too unless it is a weight the backend packs once, with the same results as eager.
#include <filesystem>
#include <unistd.h>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_CASE(transposed_left_operands_are_copied_dense) {
  std::string dir = (fs::temp_directory_path() / ("kiln-test-gemm-layout-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  set_debug_dir(dir);
  auto fn = [](const Tensor& dy, const Tensor& x, const Tensor& a) {
    Tensor g = dy * 2.0 + 1.0;  // [2, 160, 272]: made in a pipeline
    Tensor weight_grad = matmul(g.flatten(0, 1).t(), x.flatten(0, 1));  // [272, 320] x [320, 288]
    Tensor plain = matmul((a - 1.0).t(), x.flatten(0, 1).t().t());       // 2-D transpose: [300, 320] x [320, 288]
    return std::make_tuple(weight_grad, plain);
  };
  auto f = compile(fn, {.backend = "halide", .name = "gemm layout"});
  Tensor dy = random_tensor({2, 160, 272}, f32, 1), x = random_tensor({2, 160, 288}, f32, 2),
         a = random_tensor({320, 300}, f32, 3);
  auto [w, p] = f(dy, x, a);
  auto [ew, ep] = fn(dy, x, a);
  check_close(w, host_values(ew), ew.shape(), "dy^T x");
  check_close(p, host_values(ep), ep.shape(), "a^T x");
  set_debug_dir("");
  std::string fusion = dumped(dir, ".fusion.txt");
  BOOST_TEST(fusion.find("dense GEMM operands: 2 changed") != std::string::npos, fusion);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(transposed_right_operands_are_copied_dense_unless_packed) {
  std::string dir = (fs::temp_directory_path() / ("kiln-test-gemm-layout-right-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  set_debug_dir(dir);
  // w is an argument (a weight the caller updates between calls, as in a train step): x w^T reads
  // a copy made first; (b * 2)^T is copied after the pipeline that makes b * 2.
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y = matmul(x, w.t());                   // [2, 150, 320] x [320, 288]
    Tensor z = matmul(y.flatten(0, 1), (b * 2.0).t());  // [300, 288] x [288, 260]
    return std::make_tuple(y, z);
  };
  auto f = compile(fn, {.backend = "halide", .name = "gemm layout right"});
  Tensor x = random_tensor({2, 150, 320}, f32, 4), w = random_tensor({288, 320}, f32, 5),
         b = random_tensor({260, 288}, f32, 6);
  auto [y, z] = f(x, w, b);
  auto [ey, ez] = fn(x, w, b);
  check_close(y, host_values(ey), ey.shape(), "x w^T");
  check_close(z, host_values(ez), ez.shape(), "y (2b)^T");

  // A captured weight of an inference graph is packed once per version, not copied on each call.
  auto g = compile([w](const Tensor& x) { return matmul(x, w.t()); }, {.backend = "halide", .name = "gemm layout packed"});
  Tensor gy = g(x);
  check_close(gy, host_values(ey), ey.shape(), "x w^T, w captured");
  set_debug_dir("");
  std::string fusion = dumped(dir, "right_graph_1.fusion.txt");
  BOOST_TEST(fusion.find("dense GEMM operands: 2 changed") != std::string::npos, fusion);
  std::string packed = dumped(dir, "packed_graph_1.fusion.txt");
  BOOST_TEST(packed.find("dense GEMM operands") == std::string::npos, packed);
  fs::remove_all(dir);
}
