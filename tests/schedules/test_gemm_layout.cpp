// GEMM layouts on the CPU (schedules/gemm_layout.h): a matmul's transposed left operand is copied
// dense where it is made, flattened leading dims included (a weight gradient's dy^T), with the
// same results as eager.
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
  BOOST_TEST(fusion.find("2 GEMM left operands copied dense where they are made") != std::string::npos, fusion);
  fs::remove_all(dir);
}
