// `kiln bench compile`: the host overhead of calling a compiled function. A 10-op MLP on a
// one-row input runs eagerly and compiled (eager backend: the same kernels, one dispatch per op);
// the difference is what the compile layer adds per call (guard check, cache lookup, running the
// graph). A compiled function with no ops measures the guard check and lookup alone.
#include <cstdio>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "kiln.h"

namespace kiln::bench {

int run_bench_compile(const BenchOptions& opts) {
  manual_seed(0);
  Tensor w1 = randn({16, 16}), b1 = randn({16}), w2 = randn({16, 16}), b2 = randn({16});
  auto mlp = [&](const Tensor& x) { return (relu(linear(relu(linear(x, w1, b1)), w2, b2)) * 0.5).sum(); };
  Tensor x = randn({1, 16});
  auto compiled = compile(mlp, {.name = "mlp10"});
  auto identity = compile([](const Tensor& t) { return t; }, {.name = "identity"});
  int ops = explain(compiled, x).op_count;

  Timing eager = time_median([&] { mlp(x); }, 100);
  Timing comp = time_median([&] { compiled(x); }, 100);
  Timing empty = time_median([&] { identity(x); }, 1000);
  // Second round, interleaved with the first, to show the noise of a shared machine.
  Timing eager2 = time_median([&] { mlp(x); }, 100);
  Timing comp2 = time_median([&] { compiled(x); }, 100);
  double e_us = std::min(eager.median_s, eager2.median_s) * 1e6, c_us = std::min(comp.median_s, comp2.median_s) * 1e6;
  // compile(Module&) also checks the identity of every parameter on each call.
  nn::MLP net({16, 16, 16, 16});
  auto compiled_net = compile(net, {.name = "mlp_module"});
  Timing net_eager = time_median([&] { net.forward(x); }, 100);
  Timing net_comp = time_median([&] { compiled_net(x); }, 100);
  double ne_us = net_eager.median_s * 1e6, nc_us = net_comp.median_s * 1e6;

  std::printf("compiled-call host overhead (backend eager, CPU)\n");
  std::printf("  %-38s %8d\n", "ops in the MLP graph", ops);
  std::printf("  %-38s %8.2f us\n", "eager call (median)", e_us);
  std::printf("  %-38s %8.2f us\n", "compiled call (median)", c_us);
  std::printf("  %-38s %8.2f us   (goal <= 10 us)\n", "overhead per call (compiled - eager)", c_us - e_us);
  std::printf("  %-38s %8.2f us\n", "no-op compiled call (guards + lookup)", empty.median_s * 1e6);
  std::printf("  %-38s %8.2f us eager, %.2f us compiled (%zu parameters)\n", "nn::MLP via compile(Module&)", ne_us,
              nc_us, net.parameters().size());
  std::printf("  cache hits: %d, compiles: %d\n", compiled.stats().cache_hits, compiled.stats().compiles);

  if (!opts.json_path.empty()) {
    Json j = Json::object();
    j.set("suite", "compile_overhead");
    j.set("device", "cpu");
    j.set("backend", "eager");
    j.set("mlp_ops", ops);
    j.set("eager_call_us", e_us);
    j.set("compiled_call_us", c_us);
    j.set("overhead_us", c_us - e_us);
    j.set("noop_compiled_call_us", empty.median_s * 1e6);
    j.set("module_eager_call_us", ne_us);
    j.set("module_compiled_call_us", nc_us);
    write_file_atomic(opts.json_path, j.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
