// Experiment 1: eager against compiled for a small model. A tiny GPT's forward (2 layers, width
// 128, batch 4 x 64 tokens) runs eagerly, then through compile(): the first call traces and
// compiles (its phases from CompileStats), a second compiled function of the same model finds
// its code in the disk cache, and both are timed at steady state (median of 20 calls after 3 of
// warm-up). With --device cuda the same on the GPU. Exits non-zero when the compiled outputs
// differ from the eager ones.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "kiln.h"

using namespace kiln;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename F>
double median_ms(Device d, F&& fn) {
  auto sync = [&] {
    if (d.is_cuda()) cuda_synchronize(d.index);
  };
  for (int i = 0; i < 3; ++i) fn();
  sync();
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    sync();
    ms.push_back(seconds_since(t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Device d = argc > 2 && std::strcmp(argv[1], "--device") == 0 ? device_from_name(argv[2]) : Device::cpu();
  manual_seed(0);
  nn::TinyGpt model({.vocab = 64, .seq = 64, .width = 128, .heads = 4, .layers = 2});
  model.eval();
  model.to(d);
  Tensor tokens = randint(0, 64, {4, 64}).to(d);
  NoGradGuard no_grad;

  Tensor eager = model.forward(tokens);
  double eager_ms = median_ms(d, [&] { model.forward(tokens); });

  auto compiled = compile([&](const Tensor& t) { return model.forward(t); }, {.backend = "halide", .name = "tiny_gpt"});
  auto t0 = std::chrono::steady_clock::now();
  Tensor out = compiled(tokens);
  if (d.is_cuda()) cuda_synchronize(d.index);
  double first_s = seconds_since(t0);
  CompileStats stats = compiled.stats();
  double compiled_ms = median_ms(d, [&] { compiled(tokens); });

  auto again = compile([&](const Tensor& t) { return model.forward(t); }, {.backend = "halide", .name = "tiny_gpt again"});
  t0 = std::chrono::steady_clock::now();
  Tensor out2 = again(tokens);
  if (d.is_cuda()) cuda_synchronize(d.index);
  double cached_s = seconds_since(t0);

  double diff = std::max(abs(out - eager).max().item<double>(), abs(out2 - eager).max().item<double>());
  std::printf("tiny GPT forward, tokens [4, 64] on %s\n", d.is_cuda() ? "cuda" : "cpu");
  std::printf("| measure | value |\n| --- | --- |\n");
  std::printf("| eager, steady state | %.3f ms |\n", eager_ms);
  std::printf("| compiled, first call (trace %.3f s, compile %.3f s) | %.3f s |\n", stats.trace_s, stats.compile_s,
              first_s);
  std::printf("| a second compiled function, first call (disk cache) | %.3f s |\n", cached_s);
  std::printf("| compiled, steady state (%d kernels a call) | %.3f ms |\n", stats.kernels, compiled_ms);
  std::printf("| speedup at steady state | %.2fx |\n", eager_ms / compiled_ms);
  std::printf("compile phases:");
  for (const auto& [phase, s] : stats.phase_s) std::printf(" %s %.3f s,", phase.c_str(), s);
  std::printf("\nmax |compiled - eager| = %.3g\n", diff);
  return diff < 1e-4 ? 0 : 1;
}
