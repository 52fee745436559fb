// `kiln bench models`: every zoo model, eager against compiled, inference (no grad): steady-state
// medians after warm-up, the first compiled call's compile time (cold: a fresh compiled function)
// and the kernels one compiled call launches.
#include <cstdio>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/zoo.h"

namespace kiln::bench {

int run_bench_models(const BenchOptions& opts) {
  KILN_CHECK(opts.device.is_cpu(), "kiln bench models: only --device cpu is available in this build");
  NoGradGuard no_grad;
  Json models = Json::array();
  std::printf("backend %s, scheduler %s, device cpu\n%-18s %10s %12s %8s %14s %8s\n", opts.backend.c_str(), opts.scheduler.c_str(), "model", "eager ms",
              "compiled ms", "ratio", "compile cold s", "kernels");
  for (const std::string& name : zoo::zoo_names()) {
    if (!opts.filter.empty() && name.find(opts.filter) == std::string::npos) continue;
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench);
    TensorList in = m.make_inputs();
    CompiledFunction<std::vector<Tensor>(std::vector<Tensor>)> f(
        [&](std::vector<Tensor> xs) { return m.forward(xs); }, {.backend = opts.backend, .scheduler = opts.scheduler, .name = name},
        m.module.get());
    double t0 = now_seconds();
    f(in);
    double cold_s = now_seconds() - t0;
    Timing eager = time_median([&] { m.forward(in); }, 1, 2, 7, 0.5, 50);
    Timing compiled = time_median([&] { f(in); }, 1, 2, 7, 0.5, 50);
    double e = eager.median_s * 1e3, c = compiled.median_s * 1e3;
    int kernels = f.stats().kernels;
    std::printf("%-18s %10.2f %12.2f %8.2f %14.2f %8d\n", name.c_str(), e, c, c / e, cold_s, kernels);
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", name);
    j.set("eager_ms", e);
    j.set("compiled_ms", c);
    j.set("compile_cold_s", cold_s);
    j.set("compile_warm_s", nullptr);  // no disk cache yet
    j.set("kernels", kernels);
    models.push(j);
  }
  if (!opts.json_path.empty()) {
    Json report = Json::object();
    report.set("suite", "models");
    report.set("device", "cpu");
    report.set("backend", opts.backend);
    report.set("scheduler", opts.scheduler);
    report.set("models", models);
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
