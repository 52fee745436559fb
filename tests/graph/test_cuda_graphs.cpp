// CUDA graphs' options and fallbacks on the CPU (graph/cuda_graphs.h; tests/cuda/test_cuda_graphs.cpp
// replays them on a device): an unknown mode is an error that names the modes; with
// "reduce-overhead", calls on CPU tensors run as before, counted as fallbacks, with the same
// results.
#include "graph/cuda_graphs.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(an_unknown_mode_names_the_modes) {
  check_error([] { compile([](const Tensor& x) { return x * 2.0; }, {.mode = "max-autotune"}); },
              {"compile: mode", "\"default\" or \"reduce-overhead\"", "max-autotune"});
}

BOOST_AUTO_TEST_CASE(cpu_calls_run_as_before) {
  Tensor w = random_tensor({16, 8}, DType::f32, 2);
  auto fn = [&](const Tensor& x) { return softmax(matmul(x, w), -1); };
  auto graphed = compile(fn, {.backend = "halide", .name = "graphed_cpu", .mode = "reduce-overhead"});
  CudaGraphCounters before = cuda_graph_counters();
  for (int call = 0; call < 3; ++call) {
    Tensor x = random_tensor({4, 16}, DType::f32, 7 + uint64_t(call));
    Tensor want = fn(x);
    check_close(graphed(x), host_values(want), want.shape(), {1e-5, 1e-6}, "call " + std::to_string(call));
  }
  CudaGraphCounters after = cuda_graph_counters();
  BOOST_TEST(after.captures == before.captures);
  BOOST_TEST(after.fallbacks == before.fallbacks + 3);
}
