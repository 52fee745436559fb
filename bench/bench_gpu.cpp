// `kiln bench gpu`: kiln on a CUDA device, for the side-by-side run with PyTorch
// (bench/torch/, scripts/gpu_run.sh): the device-to-device copy bandwidth, three memory-bound
// kernels as compiled pipelines (and eager), every zoo model eager, compiled and replayed as a
// CUDA graph (its forward, no grad, and its training step), and the host overhead of a compiled
// call. Device times are CUDA events around one call, median after warm-up, as
// bench/torch/bench_torch.py measures PyTorch.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bench/commands.h"
#include "bench/gpu_timing.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

struct KernelCase {
  std::string name;
  Shape shape;
  double bytes;
  std::function<std::vector<Tensor>(std::vector<Tensor>)> fn;
  std::function<std::vector<Tensor>()> inputs;
};

std::vector<KernelCase> kernel_cases(Device d) {
  const int64_t n = int64_t(64) << 20, rows = 8192, cols = 4096;
  return {
      {"pointwise_axpb", {n}, 3.0 * 4 * double(n), [](std::vector<Tensor> x) { return std::vector<Tensor>{x[0] * 2.0 + x[1]}; },
       [=] { return std::vector<Tensor>{randn({n}, {.device = d}), randn({n}, {.device = d})}; }},
      {"softmax_rows", {rows, cols}, 2.0 * 4 * double(rows * cols),
       [](std::vector<Tensor> x) { return std::vector<Tensor>{softmax(x[0], -1)}; },
       [=] { return std::vector<Tensor>{randn({rows, cols}, {.device = d})}; }},
      {"layernorm_rows", {rows, cols}, 2.0 * 4 * double(rows * cols),
       [=](std::vector<Tensor> x) { return std::vector<Tensor>{layer_norm(x[0], {cols}, x[1], x[2])}; },
       [=] {
         return std::vector<Tensor>{randn({rows, cols}, {.device = d}), randn({cols}, {.device = d}),
                                    randn({cols}, {.device = d})};
       }},
  };
}

// Host microseconds per call of a compiled one-op function on a tiny tensor: guards, lookup and
// launch, without waiting for the device.
double host_overhead_us(Device d) {
  auto f = compile([](const Tensor& x) { return x * 2.0 + 1.0; }, {.backend = "halide", .name = "host_overhead"});
  Tensor x = randn({16}, {.device = d});
  f(x);
  Timing t = time_median([&] { f(x); }, 100, 10, 15, 0.2);
  cuda_synchronize(d.index);
  return t.median_s * 1e6;
}

}  // namespace

int run_bench_gpu(const BenchOptions& options) {
  KILN_CHECK(cuda_available(), "kiln bench gpu: no CUDA device (", cuda_unavailable_reason(), ")");
  BenchOptions opts = options;
  if (!opts.device.is_cuda()) opts.device = Device::cuda(0);
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
  KILN_CHECK(size != zoo::ZooSize::test, "kiln bench gpu: --size must be bench or real, got test");
  if (size == zoo::ZooSize::real) return run_bench_gpu_real(opts);
  KILN_CHECK(opts.check_dir.empty(), "kiln bench gpu: --check-dir needs --size real");
  Device d = opts.device;
  NoGradGuard no_grad;
  std::string cache_dir = (std::filesystem::temp_directory_path() / ("kiln-bench-gpu-cache-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(cache_dir);
  set_disk_cache_dir(cache_dir);
  double t0 = now_seconds();
  compile([](const Tensor& x) { return x + 1.0; }, {.backend = "halide"})(full({4}, 1.0, {.device = d}));
  std::printf("device %s; disk cache %s (Halide runtime and CUDA context in %.2f s)\n",
              cuda_context(d.index).name.c_str(), cache_dir.c_str(), now_seconds() - t0);

  Json report = Json::object();
  report.set("suite", "gpu");
  report.set("device", cuda_context(d.index).name);
  double copy = copy_gbps(d);
  report.set("copy_gbps", copy);
  std::printf("device-to-device copy: %.0f GB/s\n\n%-16s %-14s %12s %12s %10s\n", copy, "kernel", "shape",
              "compiled GB/s", "eager GB/s", "of copy");
  Json kernels = Json::array();
  for (KernelCase& k : kernel_cases(d)) {
    if (!opts.filter.empty() && k.name.find(opts.filter) == std::string::npos) continue;
    std::vector<Tensor> in = k.inputs();
    zoo::ZooFunction f(k.fn, {.backend = "halide", .name = k.name});
    f(in);
    double compiled = gbps(k.bytes, device_ms([&] { f(in); }));
    double eager = gbps(k.bytes, device_ms([&] { k.fn(in); }));
    std::printf("%-16s %-14s %12.0f %12.0f %10.2f\n", k.name.c_str(), to_string(k.shape).c_str(), compiled, eager,
                compiled / copy);
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", k.name);
    Json shape = Json::array();
    for (int64_t s : k.shape) shape.push(s);
    j.set("shape", shape);
    j.set("kiln_gbps", compiled);
    j.set("kiln_eager_gbps", eager);
    j.set("fraction_of_copy", compiled / copy);
    kernels.push(j);
  }
  report.set("kernels", kernels);

  std::printf("\n%-18s %10s %12s %8s %10s %8s %11s\n", "model", "eager ms", "compiled ms", "ratio", "cold s", "kernels",
              "graphs ms");
  Json models = Json::array();
  for (const std::string& name : zoo::zoo_names()) {
    if (!opts.filter.empty() && name.find(opts.filter) == std::string::npos) continue;
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench, d);
    TensorList in = m.make_inputs();
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "halide", .name = m.name});
    f(in);
    cuda_synchronize(d.index);
    double cold_s = zoo::compile_seconds(f.stats());
    double eager = device_ms([&] { m.forward(in); }), compiled = device_ms([&] { f(in); });
    // The same compiled forward replayed as a CUDA graph (graph/cuda_graphs.h): captured in the
    // warm-up calls.
    zoo::ZooFunction graphed =
        zoo::compile_zoo_model(m, {.backend = "halide", .name = m.name + " graphs", .mode = "reduce-overhead"});
    double graphs = device_ms([&] { graphed(in); });
    std::printf("%-18s %10.3f %12.3f %8.2f %10.3f %8d %11.3f\n", name.c_str(), eager, compiled, compiled / eager, cold_s,
                f.stats().kernels, graphs);
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", name);
    j.set("kiln_eager_ms", eager);
    j.set("kiln_compiled_ms", compiled);
    j.set("kiln_compile_cold_s", cold_s);
    j.set("kernels", f.stats().kernels);
    j.set("kiln_graphs_ms", graphs);
    auto timed = [&](const std::function<void()>& fn) {
      CudaTimer timer;
      timer.start();
      fn();
      return timer.stop_ms();
    };
    TrainStepReport t = measure_train_step(name, d, {.backend = "halide"}, timed);
    print_train_step(name, t, 3);
    set_train_step_json(j, t, "kiln_");
    TrainStepReport tg =
        measure_train_step(name, d, {.backend = "halide", .mode = "reduce-overhead"}, timed, /*eager_column=*/false);
    std::printf("%-18s train step replayed as a CUDA graph: %.3f ms\n", name.c_str(), tg.compiled_ms);
    j.set("kiln_graphs_train_ms", tg.compiled_ms);
    models.push(j);
  }
  report.set("models", models);
  double overhead = host_overhead_us(d);
  std::printf("\nhost overhead of a compiled call (one op, 16 elements): %.2f us\n", overhead);
  report.set("host_overhead_us", overhead);
  if (!opts.json_path.empty()) {
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  std::filesystem::remove_all(cache_dir);
  return 0;
}

}  // namespace kiln::bench
