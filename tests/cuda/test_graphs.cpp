// CUDA graphs (graph/cuda_graphs.h): compiled calls with mode "reduce-overhead" are captured once
// and replayed. Every zoo model's forward, called many times with new input values each call
// (new tensors, or one tensor refilled in place), gives what the same compiled function without
// graphs gives, call by call; so does its SGD training step, parameters included; outputs kept
// across replays keep their values; a call whose outputs record autograd history, or that reads
// the device on the host, runs as before, and still matches.
#include <iostream>
#include <sstream>

#include "bench/train_step.h"
#include "bench/zoo.h"
#include "cuda/cuda_available.h"
#include "graph/cuda_graphs.h"
#include "graph/logs.h"
#include "schedules/kept_outputs.h"
#include "support/reference.h"
#include "support/scoped_env.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr int kCalls = 8;

}  // namespace

BOOST_AUTO_TEST_CASE(zoo_forwards_replayed_match_plain_compiled_calls, *needs_cuda()) {
  NoGradGuard no_grad;
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::test)) {
    BOOST_TEST_CONTEXT(name) {
      manual_seed(1);
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test, kCuda);
      zoo::ZooFunction plain = zoo::compile_zoo_model(m, {.backend = "halide", .name = "plain_" + name});
      zoo::ZooFunction graphed =
          zoo::compile_zoo_model(m, {.backend = "halide", .name = "graphed_" + name, .mode = "reduce-overhead"});
      CudaGraphCounters before = cuda_graph_counters();
      std::vector<TensorList> kept;  // new tensors every call: the graph copies them in
      for (int call = 0; call < kCalls; ++call) {
        manual_seed(100 + uint64_t(call));
        kept.push_back(to_cuda(m.make_inputs()));
        Tensor want = plain(kept.back())[0].to(Device::cpu());
        Tensor got = graphed(kept.back())[0].to(Device::cpu());  // read before the next replay overwrites it
        check_close(got, host_values(want), want.shape(), {1e-5, 1e-5}, name + " call " + std::to_string(call));
      }
      CudaGraphCounters after = cuda_graph_counters();
      BOOST_TEST(after.captures >= before.captures + 1);
      BOOST_TEST(after.replays >= before.replays + uint64_t(kCalls - 2));  // all but the warm-up calls
      // One set of input tensors refilled in place: read in place by the graph.
      TensorList same = to_cuda(m.make_inputs());
      for (int call = 0; call < kCalls; ++call) {
        manual_seed(200 + uint64_t(call));
        TensorList fresh = to_cuda(m.make_inputs());
        for (size_t i = 0; i < same.size(); ++i) same[i].copy_(fresh[i]);
        Tensor want = plain(same)[0].to(Device::cpu());
        Tensor got = graphed(same)[0].to(Device::cpu());
        check_close(got, host_values(want), want.shape(), {1e-5, 1e-5}, name + " in place, call " + std::to_string(call));
      }
    }
  }
}

// A whole training step (forward, loss, backward, SGD with momentum, written back) replayed: the
// losses and parameters follow those of the same step compiled without graphs, from the same
// weights and inputs.
BOOST_AUTO_TEST_CASE(zoo_training_steps_replayed_match_plain_compiled_steps, *needs_cuda()) {
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::test)) {
    BOOST_TEST_CONTEXT(name) {
      manual_seed(3);
      zoo::ZooModel a = zoo::make_zoo_model(name, zoo::ZooSize::test, kCuda);
      manual_seed(3);
      zoo::ZooModel b = zoo::make_zoo_model(name, zoo::ZooSize::test, kCuda);
      optim::SGD opt_a(a.module->parameters(), {.lr = 0.05, .momentum = 0.9});
      optim::SGD opt_b(b.module->parameters(), {.lr = 0.05, .momentum = 0.9});
      auto plain = compile([&](std::vector<Tensor> xs) { return bench::train_step(a, opt_a, xs); },
                           {.backend = "halide", .fullgraph = true, .name = "plain_train_" + name});
      auto graphed = compile([&](std::vector<Tensor> xs) { return bench::train_step(b, opt_b, xs); },
                             {.backend = "halide", .fullgraph = true, .name = "graphed_train_" + name,
                              .mode = "reduce-overhead"});
      CudaGraphCounters before = cuda_graph_counters();
      for (int step = 0; step < kCalls; ++step) {
        manual_seed(10 + uint64_t(step));
        TensorList xs = to_cuda(a.make_inputs());
        Tensor want = plain(xs).to(Device::cpu());
        Tensor got = graphed(xs).to(Device::cpu());
        check_close(got, host_values(want), {}, {1e-5, 1e-5}, name + " loss of step " + std::to_string(step));
      }
      TensorList pa = a.module->parameters(), pb = b.module->parameters();
      for (size_t k = 0; k < pa.size(); ++k)
        check_close(pb[k].to(Device::cpu()), host_values(pa[k].to(Device::cpu())), pa[k].shape(), {1e-5, 1e-5},
                    name + " parameter " + std::to_string(k));
      BOOST_TEST(cuda_graph_counters().replays >= before.replays + uint64_t(kCalls - 2));
    }
  }
}

// Under grad mode with a parameter that requires grad, the outputs hang from the tape: such
// calls are not replayed (the backward would read what the next replay overwrites) and their
// gradients match the plain compiled function's.
BOOST_AUTO_TEST_CASE(calls_that_record_autograd_run_without_graphs, *needs_cuda()) {
  Tensor w = random_tensor({32, 16}, DType::f32, 5).to(kCuda).requires_grad_();
  auto fn = [&](const Tensor& x) { return gelu(matmul(x, w)).sum(); };
  auto plain = compile(fn, {.backend = "halide", .name = "plain_grad"});
  auto graphed = compile(fn, {.backend = "halide", .name = "graphed_grad", .mode = "reduce-overhead"});
  CudaGraphCounters before = cuda_graph_counters();
  for (int call = 0; call < 4; ++call) {
    Tensor x = random_tensor({8, 32}, DType::f32, 10 + uint64_t(call)).to(kCuda);
    plain(x).backward();
    Tensor want = w.grad().to(Device::cpu());
    w.set_grad(Tensor());
    graphed(x).backward();
    check_close(w.grad().to(Device::cpu()), host_values(want), want.shape(), {1e-5, 1e-5},
                "gradient at call " + std::to_string(call));
    w.set_grad(Tensor());
  }
  CudaGraphCounters after = cuda_graph_counters();
  BOOST_TEST(after.captures == before.captures);
  BOOST_TEST(after.fallbacks >= before.fallbacks + 2);
}

// Outputs kept across replays keep their values: each call's output, and a view of it, held until
// all calls are done, against the plain compiled function's outputs of the same calls. The
// outputs a replay writes over were copied out when the replay started.
BOOST_AUTO_TEST_CASE(outputs_kept_across_replays_keep_their_values, *needs_cuda()) {
  NoGradGuard no_grad;
  Tensor w = random_tensor({64, 48}, DType::f32, 6).to(kCuda);
  auto fn = [&](const Tensor& x) { return softmax(gelu(matmul(x, w)), -1); };
  auto plain = compile(fn, {.backend = "halide", .name = "plain_kept"});
  auto graphed = compile(fn, {.backend = "halide", .name = "graphed_kept", .mode = "reduce-overhead"});
  CudaGraphCounters before = cuda_graph_counters();
  std::vector<Tensor> inputs, kept, views, want;
  for (int call = 0; call < kCalls; ++call) {
    inputs.push_back(random_tensor({32, 64}, DType::f32, 40 + uint64_t(call)).to(kCuda));
    want.push_back(plain(inputs.back()).to(Device::cpu()));
    kept.push_back(graphed(inputs.back()));
    views.push_back(kept.back().slice(0, 8, 16));
  }
  BOOST_TEST(cuda_graph_counters().replays >= before.replays + uint64_t(kCalls - 2));
  for (int call = 0; call < kCalls; ++call) {
    check_close(kept[size_t(call)].to(Device::cpu()), host_values(want[size_t(call)]), want[size_t(call)].shape(),
                {1e-5, 1e-5}, "kept output of call " + std::to_string(call));
    check_close(views[size_t(call)].to(Device::cpu()), host_values(want[size_t(call)].slice(0, 8, 16)), {8, 48},
                {1e-5, 1e-5}, "view of the output of call " + std::to_string(call));
  }
}

// Under bf16 autocast the weight's cast is a region of parameters only, kept between calls: the
// captured graph reads the kept cast instead of computing it. A replay after the weight changed
// would read a stale cast, so the call is captured again, and gives the new weight's results.
BOOST_AUTO_TEST_CASE(replays_read_kept_parameter_regions_until_a_parameter_changes, *needs_cuda()) {
  NoGradGuard no_grad;
  Tensor w = random_tensor({64, 48}, DType::f32, 7).to(kCuda);
  auto fn = [&](const Tensor& x) {
    AutocastGuard autocast(kCuda, DType::bf16);
    return gelu(matmul(x, w)).to(DType::f32);
  };
  auto plain = compile(fn, {.backend = "halide", .name = "plain_params"});
  auto graphed = compile(fn, {.backend = "halide", .name = "graphed_params", .mode = "reduce-overhead"});
  CudaGraphCounters before = cuda_graph_counters();
  int64_t reused = kept_outputs_reused();
  for (int call = 0; call < 8; ++call) {
    if (call == 4) w.copy_(random_tensor({64, 48}, DType::f32, 8).to(kCuda));
    Tensor x = random_tensor({32, 64}, DType::f32, 60 + uint64_t(call)).to(kCuda);
    Tensor want = plain(x).to(Device::cpu());
    check_close(graphed(x).to(Device::cpu()), host_values(want), want.shape(), {1e-5, 1e-5},
                "call " + std::to_string(call) + (call >= 4 ? " (after the weight changed)" : ""));
  }
  CudaGraphCounters after = cuda_graph_counters();
  BOOST_TEST(kept_outputs_reused() > reused);
  BOOST_TEST(after.captures >= before.captures + 2);  // once, and again after the change
  BOOST_TEST(after.replays >= before.replays + 3);
}

// A call that waits for the device cannot be captured: with KILN_CHECK_INDICES=1 the embedding
// reads its CUDA indices on the host. Such calls run without graphs, say why under perf_hints,
// and give the plain compiled function's values; an index out of range is then an error.
BOOST_AUTO_TEST_CASE(calls_that_read_the_device_on_the_host_run_without_graphs, *needs_cuda()) {
  NoGradGuard no_grad;
  ScopedEnv check("KILN_CHECK_INDICES", "1");
  set_logs("perf_hints");
  Tensor table = random_tensor({10, 16}, DType::f32, 7).to(kCuda);
  auto fn = [&](const Tensor& idx) { return gelu(embedding(table, idx)); };
  auto plain = compile(fn, {.backend = "halide", .name = "plain_checked"});
  auto graphed = compile(fn, {.backend = "halide", .name = "graphed_checked", .mode = "reduce-overhead"});
  CudaGraphCounters before = cuda_graph_counters();
  std::ostringstream logged;
  std::streambuf* saved = std::cerr.rdbuf(logged.rdbuf());
  for (int call = 0; call < 4; ++call) {
    manual_seed(60 + uint64_t(call));
    Tensor idx = randint(0, 10, {12}, {DType::i64, Device::cpu()}).to(kCuda);
    Tensor want = plain(idx).to(Device::cpu());
    check_close(graphed(idx).to(Device::cpu()), host_values(want), want.shape(), {1e-6, 1e-6},
                "call " + std::to_string(call));
  }
  std::cerr.rdbuf(saved);
  set_logs("");
  CudaGraphCounters after = cuda_graph_counters();
  BOOST_TEST(after.captures == before.captures);
  BOOST_TEST(after.fallbacks >= before.fallbacks + 1);
  BOOST_TEST_INFO("perf_hints: " << logged.str());
  BOOST_TEST(logged.str().find("graphed_checked") != std::string::npos);
  BOOST_TEST(logged.str().find("not replayed as a CUDA graph") != std::string::npos);
  Tensor bad = full({3}, 10, {DType::i64, Device::cpu()}).to(kCuda);
  BOOST_CHECK_THROW(embedding(table, bad), Error);
}
