// `kiln bench models`: every zoo model, eager against compiled, inference (no grad): steady-state
// medians after warm-up, compile seconds (tracing plus the backend) cold, with an empty disk
// cache, and warm, in a fresh process whose disk cache holds the model (median of 3 processes),
// and the kernels one compiled call launches. The disk cache is a fresh folder for the run; the
// Halide runtime, built once per cache, is built before the first model is timed.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "bench/commands.h"
#include "bench/fresh_process.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

zoo::ZooFunction compile_model(zoo::ZooModel& m, const BenchOptions& opts) {
  return zoo::compile_zoo_model(m, {.backend = opts.backend, .scheduler = opts.scheduler, .name = m.name});
}

// Median compile seconds of `name` in 3 fresh processes (`kiln bench compile-once`).
double warm_compile_s(const BenchOptions& opts, const std::string& name) {
  return fresh_process_median("'" + opts.self_path + "' bench compile-once " + name + " --backend " + opts.backend +
                                  " --scheduler " + opts.scheduler,
                              "compile_s", 3, "kiln bench models");
}

}  // namespace

int run_compile_once(const BenchOptions& opts) {
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
  if (size == zoo::ZooSize::real) set_float32_matmul_precision(Float32MatmulPrecision::high);
  manual_seed(0);
  zoo::ZooModel m = zoo::make_zoo_model(opts.filter, size, opts.device);
  TensorList in = m.make_inputs();
  double s = 0, first = 0;
  if (opts.train) {
    EnableGradGuard grad;
    optim::AdamW opt(m.module->parameters(), {});
    std::optional<DType> autocast = autocast_of(opts.precision);
    auto step = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs, autocast); },
                        {.backend = opts.backend, .scheduler = opts.scheduler, .name = m.name + " train step"});
    double t0 = now_seconds();
    step(in);
    first = now_seconds() - t0;
    s = zoo::compile_seconds(step.stats());
  } else {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> mixed;
    if (std::optional<DType> t = autocast_of(opts.precision)) mixed.emplace(opts.device, *t);
    zoo::ZooFunction f = compile_model(m, opts);
    double t0 = now_seconds();
    f(in);
    first = now_seconds() - t0;
    s = zoo::compile_seconds(f.stats());
  }
  std::printf("compile_s %.6f\nfirst_call_s %.6f\n", s, first);
  return 0;
}

int run_bench_models(const BenchOptions& opts) {
  KILN_CHECK(opts.device.is_cpu(), "kiln bench models: --device ", opts.device,
             " is measured by `kiln bench gpu` (models, kernels and host overhead on CUDA, with CUDA events)");
  NoGradGuard no_grad;
  bool cached = disk_cache_enabled();
  std::string cache_dir = (std::filesystem::temp_directory_path() / ("kiln-bench-cache-" + std::to_string(::getpid()))).string();
  if (cached) {
    std::filesystem::remove_all(cache_dir);
    set_disk_cache_dir(cache_dir);
    ::setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);  // for the fresh processes
    double t0 = now_seconds();
    compile([](const Tensor& x) { return x + 1.0; }, {.backend = opts.backend})(full({4}, 1.0));
    std::printf("disk cache %s (Halide runtime built in %.2f s)\n", cache_dir.c_str(), now_seconds() - t0);
  }
  Json models = Json::array();
  std::printf("backend %s, scheduler %s, device cpu\n%-18s %10s %12s %8s %10s %10s %8s\n", opts.backend.c_str(),
              opts.scheduler.c_str(), "model", "eager ms", "compiled ms", "ratio", "cold s", "warm s", "kernels");
  for (const std::string& name : zoo::zoo_names()) {
    if (!opts.filter.empty() && name.find(opts.filter) == std::string::npos) continue;
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench);
    TensorList in = m.make_inputs();
    zoo::ZooFunction f = compile_model(m, opts);
    f(in);
    double cold_s = zoo::compile_seconds(f.stats());
    double warm_s = cached ? warm_compile_s(opts, name) : -1;
    Timing eager = time_median([&] { m.forward(in); }, 1, 2, 7, 0.5, 50);
    Timing compiled = time_median([&] { f(in); }, 1, 2, 7, 0.5, 50);
    double e = eager.median_s * 1e3, c = compiled.median_s * 1e3;
    int kernels = f.stats().kernels;
    std::printf("%-18s %10.2f %12.2f %8.2f %10.3f %10.3f %8d\n", name.c_str(), e, c, c / e, cold_s, warm_s, kernels);
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", name);
    j.set("eager_ms", e);
    j.set("compiled_ms", c);
    j.set("compile_cold_s", cold_s);
    if (cached) j.set("compile_warm_s", warm_s);
    else j.set("compile_warm_s", nullptr);  // KILN_CACHE=0
    j.set("kernels", kernels);
    if (opts.train) {
      TrainStepReport t = measure_train_step(name, Device::cpu(), {.backend = opts.backend, .scheduler = opts.scheduler},
                                             [](const std::function<void()>& fn) {
                                               double t0 = now_seconds();
                                               fn();
                                               return (now_seconds() - t0) * 1e3;
                                             });
      print_train_step(name, t, 2);
      set_train_step_json(j, t, "");
    }
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
  if (cached) std::filesystem::remove_all(cache_dir);
  return 0;
}

}  // namespace kiln::bench
