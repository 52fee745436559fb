// `kiln bench gpu --size real`: kiln on a CUDA device at the sizes real users run, TF32 matmuls
// (set_float32_matmul_precision(high), as PyTorch's allow_tf32): the copy bandwidth; every GPU
// schedule class at real sizes (bench/real_kernels.h), compiled and eager, in GB/s; and the
// real-size zoo (GPT-2 small at batch 8 x 1024, an MLP and a transformer block over 8192 tokens):
// inference eager and compiled, the training step (forward, loss, backward, AdamW, zero_grad)
// eager and compiled as one graph, cold and warm compile seconds (warm: a fresh process with the
// filled disk cache), peak device memory, where one compiled step spends its device time, and
// the losses of 20 steps eager against compiled; and the fused attention op alone in TFLOP/s
// (bench/real_attention.h); with --only precision, bf16 and f16 training against f32 over 200 steps
// (bench/real_precision.h). Eager and compiled models run one after the
// other, each alone on the device, so that each peak is its own. bench/torch/bench_real.py times
// PyTorch by the same method; bench/torch/merge_real.py joins the two.
//
// With --precision bf16 (and --only models) each model's forward and loss run under bf16 autocast,
// backward and AdamW outside it (bench/torch/bench_real.py --precision bf16 is the same); the
// rows say "precision": "bf16".
//
// With --check-dir DIR, gpt2_small's initial weights (safetensors), its batch (.npy), its first
// loss and gradients in full f32, and the compiled losses are written to DIR for bench_real.py
// --check-dir to compare with PyTorch's.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bench/commands.h"
#include "bench/fresh_process.h"
#include "bench/gpu_timing.h"
#include "bench/json.h"
#include "bench/real_attention.h"
#include "bench/real_breakdown.h"
#include "bench/real_precision.h"
#include "bench/real_kernels.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

constexpr int kTrainSteps = 20;   // per phase; the losses of all of them are compared
constexpr int kTimedFrom = 3;     // steps before this one are warm-up

double median_of(std::vector<double> xs) {
  if (xs.empty()) return -1;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

double gb(size_t bytes) { return double(bytes) / 1e9; }

// The largest difference of two loss curves, relative to the largest |loss| of the first (a loss
// that starts at 0, the mean of a layer norm's output, has no relative error of its own).
double losses_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 1e-12, worst = 0;
  for (double l : a) scale = std::max(scale, std::abs(l));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst / scale;
}

// Median seconds of compiling `name` in a fresh process with the filled disk cache (`kiln bench
// compile-once`), over `runs` processes.
double warm_compile_s(const BenchOptions& opts, const std::string& name, bool train, int runs) {
  return fresh_process_median("'" + opts.self_path + "' bench compile-once " + name + " --size real --device " +
                                  opts.device.str() + " --precision " + opts.precision + (train ? " --train" : ""),
                              "compile_s", runs, "kiln bench gpu");
}

struct Phase {
  std::vector<double> losses, step_ms;
  size_t peak_bytes = 0;
  double compile_s = 0;
  uint64_t driver_allocations = 0;  // cuMemAlloc calls in the timed (steady-state) steps
};

// kTrainSteps steps of `step` on the same batch: each step's device time (events, no host wait
// between steps), its loss (read at the end) and the peak of device memory over all of them.
// With `profiled`, the timed steps run between cuProfilerStart and cuProfilerStop: the window
// that the kernel summary (bench/kernel_summary.cpp, KILN_KERNEL_SUMMARY_WINDOW=profiler) counts.
Phase run_steps(Device d, const std::function<Tensor()>& step, bool profiled = false) {
  Phase p;
  CachingAllocator& memory = cuda_caching_allocator(d.index);
  cuda_synchronize(d.index);
  memory.reset_peak();
  CudaMarks marks(d.index);
  std::vector<Tensor> losses;
  uint64_t allocations = 0;
  for (int i = 0; i < kTrainSteps; ++i) {
    if (i == kTimedFrom) {
      allocations = cuda_driver_allocations();
      if (profiled) {
        cuda_synchronize(d.index);
        cuda_api().cuProfilerStart();
      }
    }
    marks.mark();
    losses.push_back(step());
    marks.mark();
  }
  if (profiled) {
    cuda_synchronize(d.index);
    cuda_api().cuProfilerStop();
  }
  p.driver_allocations = cuda_driver_allocations() - allocations;
  std::vector<double> ms = marks.intervals_ms();
  for (size_t i = 0; i < ms.size(); i += 2)
    if (int(i / 2) >= kTimedFrom) p.step_ms.push_back(ms[i]);
  p.peak_bytes = memory.stats().peak_allocated;
  for (const Tensor& l : losses) p.losses.push_back(l.to(Device::cpu()).item<float>());
  return p;
}

// kProfiledCalls calls of `call` between cuProfilerStart and cuProfilerStop (the kernel summary's
// window, as run_steps' `profiled`), after the caller's warm-up.
constexpr int kProfiledCalls = 10;
void profile_calls(Device d, const std::function<void()>& call) {
  cuda_synchronize(d.index);
  cuda_api().cuProfilerStart();
  for (int i = 0; i < kProfiledCalls; ++i) call();
  cuda_synchronize(d.index);
  cuda_api().cuProfilerStop();
}

// gpt2_small's first step in full f32 for bench_real.py --check-dir: weights, batch, loss, gradients.
void write_check_files(zoo::ZooModel& m, const TensorList& in, const std::string& dir) {
  std::filesystem::create_directories(dir);
  nn::save_state_dict(*m.module, dir + "/" + m.name + ".safetensors");
  save_npy(dir + "/tokens.npy", in.at(0).to(Device::cpu()));
  save_npy(dir + "/targets.npy", m.targets.to(Device::cpu()));
  Float32MatmulPrecision saved = float32_matmul_precision();
  set_float32_matmul_precision(Float32MatmulPrecision::highest);
  Tensor loss = m.loss(m.forward(in));
  loss.backward();
  set_float32_matmul_precision(saved);
  save_npy(dir + "/kiln_loss.npy", loss.detach().to(Device::cpu()));
  std::vector<std::pair<std::string, Tensor>> grads;
  for (auto& [name, p] : m.module->named_parameters()) {
    grads.push_back({name, p.grad()});
    p.set_grad(Tensor());
  }
  nn::save_safetensors(grads, dir + "/kiln_grads.safetensors");
  std::printf("  wrote %s's weights, batch, first loss (%.6f) and gradients to %s\n", m.name.c_str(),
              loss.to(Device::cpu()).item<float>(), dir.c_str());
}

// kTrainSteps losses of the model trained from its initial weights on one batch, eager or as one
// compiled step.
std::vector<double> loss_curve(const std::string& name, Device d, bool compiled) {
  manual_seed(0);
  zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real, d);
  TensorList in = m.make_inputs();
  optim::AdamW opt(m.module->parameters(), {});
  if (!compiled) return run_steps(d, [&] { return train_step(m, opt, in); }).losses;
  auto step = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs); },
                      {.backend = "halide", .name = name + " train step"});
  return run_steps(d, [&] { return step(in); }).losses;
}

// The check's loss curves in full f32 (TF32 would round each matmul to 10 mantissa bits, which
// 20 steps of AdamW amplify): eager against compiled here, the compiled curve written for
// bench_real.py to compare with PyTorch's.
void check_loss_curves(const std::string& name, const BenchOptions& opts, Json& j) {
  Float32MatmulPrecision saved = float32_matmul_precision();
  set_float32_matmul_precision(Float32MatmulPrecision::highest);
  std::vector<double> eager = loss_curve(name, opts.device, false), compiled = loss_curve(name, opts.device, true);
  set_float32_matmul_precision(saved);
  double diff = losses_rel_diff(eager, compiled);
  Json el = Json::array(), cl = Json::array();
  for (double l : eager) el.push(l);
  for (double l : compiled) cl.push(l);
  j.set("f32_eager_losses", el);
  j.set("f32_compiled_losses", cl);
  j.set("f32_losses_max_rel_diff", diff);
  std::vector<float> losses(compiled.begin(), compiled.end());
  save_npy(opts.check_dir + "/kiln_losses.npy", from_vector<float>(losses));
  std::printf("%-18s %d steps in full f32: eager %.4f -> %.4f, compiled %.4f -> %.4f, within %.2g\n", name.c_str(),
              kTrainSteps, eager.front(), eager.back(), compiled.front(), compiled.back(), diff);
}

Json measure_model(const std::string& name, const BenchOptions& opts, StepTables& tables) {
  Device d = opts.device;
  double infer_cold = 0;
  std::optional<DType> autocast = autocast_of(opts.precision);
  Json j = Json::object();
  j.set("name", name);
  j.set("precision", opts.precision);
  {  // inference
    NoGradGuard no_grad;
    std::optional<AutocastGuard> mixed;
    if (autocast) mixed.emplace(d, *autocast);
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real, d);
    TensorList in = m.make_inputs();
    j.set("description", m.description);
    double eager = device_ms([&] { m.forward(in); }, 2, 10, 0.5);
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "halide", .name = m.name});
    f(in);
    cuda_synchronize(d.index);
    double cold = infer_cold = zoo::compile_seconds(f.stats());
    double compiled = device_ms([&] { f(in); }, 2, 10, 0.5);
    if (opts.profile == "inference") profile_calls(d, [&] { f(in); });
    // The same forward replayed as a CUDA graph (graph/cuda_graphs.h), as torch.compile's
    // mode="reduce-overhead": the third call captures it, so three calls warm it up.
    zoo::ZooFunction graphed =
        zoo::compile_zoo_model(m, {.backend = "halide", .name = m.name + " graphs", .mode = "reduce-overhead"});
    double graphs = device_ms([&] { graphed(in); }, 3, 10, 0.5);
    j.set("kiln_eager_ms", eager);
    j.set("kiln_compiled_ms", compiled);
    j.set("kiln_graphs_ms", graphs);
    j.set("kernels", f.stats().kernels);
    std::printf("%-18s inference: eager %.2f ms, compiled %.2f ms (%d kernels), replayed as a CUDA graph %.2f ms, "
                "compile %.2f s\n",
                name.c_str(), eager, compiled, f.stats().kernels, graphs, cold);
  }
  j.set("kiln_compile_infer_warm_s", warm_compile_s(opts, name, false, 1));

  EnableGradGuard grad;
  Phase eager, compiled;
  {
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real, d);
    TensorList in = m.make_inputs();
    if (!opts.check_dir.empty() && name == "gpt2_small") write_check_files(m, in, opts.check_dir);
    optim::AdamW opt(m.module->parameters(), {});
    eager = run_steps(d, [&] { return train_step(m, opt, in, autocast); });
    eager_op_breakdown(name, d, [&] { train_step(m, opt, in, autocast); }, tables.eager_ops);
  }
  {
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real, d);
    TensorList in = m.make_inputs();
    optim::AdamW opt(m.module->parameters(), {});
    auto step = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs, autocast); },
                        {.backend = "halide", .name = name + " train step"});
    compiled = run_steps(d, [&] { return step(in); }, opts.profile == "train");
    compiled.compile_s = zoo::compile_seconds(step.stats());  // the first step compiled it
    step_breakdown(name, d, [&] { step(in); }, tables);
  }
  double graphs_train_ms = 0;
  {  // the compiled step replayed as a CUDA graph (its warm-up steps capture it)
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real, d);
    TensorList in = m.make_inputs();
    optim::AdamW opt(m.module->parameters(), {});
    auto step = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs, autocast); },
                        {.backend = "halide", .name = name + " train step graphs", .mode = "reduce-overhead"});
    Phase graphed = run_steps(d, [&] { return step(in); });
    graphs_train_ms = median_of(graphed.step_ms);
    double diff = losses_rel_diff(compiled.losses, graphed.losses);
    j.set("graphs_losses_max_rel_diff", diff);
    std::printf("%-18s train step replayed as a CUDA graph: %.2f ms, losses within %.2g of the compiled step's\n",
                name.c_str(), graphs_train_ms, diff);
  }
  j.set("kiln_graphs_train_ms", graphs_train_ms);
  if (!opts.check_dir.empty() && name == "gpt2_small") check_loss_curves(name, opts, j);
  double worst = losses_rel_diff(eager.losses, compiled.losses);
  j.set("kiln_eager_train_ms", median_of(eager.step_ms));
  j.set("kiln_compiled_train_ms", median_of(compiled.step_ms));
  j.set("kiln_compile_cold_s", compiled.compile_s);
  j.set("kiln_compile_infer_cold_s", infer_cold);
  double warm = warm_compile_s(opts, name, true, 1);
  j.set("kiln_compile_warm_s", warm);
  j.set("kiln_peak_gb", gb(compiled.peak_bytes));
  j.set("kiln_eager_peak_gb", gb(eager.peak_bytes));
  j.set("kiln_eager_driver_allocations", double(eager.driver_allocations));
  j.set("kiln_compiled_driver_allocations", double(compiled.driver_allocations));
  Json el = Json::array(), cl = Json::array();
  for (double l : eager.losses) el.push(l);
  for (double l : compiled.losses) cl.push(l);
  j.set("kiln_eager_losses", el);
  j.set("kiln_compiled_losses", cl);
  j.set("losses_max_rel_diff", worst);
  std::printf("%-18s train step: eager %.2f ms, compiled %.2f ms, compile %.2f s cold, %.2f s warm; peak %.2f GB "
              "eager, %.2f GB compiled; losses %.4f -> %.4f, eager vs compiled within %.2g\n",
              name.c_str(), median_of(eager.step_ms), median_of(compiled.step_ms), compiled.compile_s, warm, gb(eager.peak_bytes), gb(compiled.peak_bytes),
              compiled.losses.front(), compiled.losses.back(), worst);
  std::printf("%-18s cuMemAlloc calls in %d steady-state steps: eager %llu, compiled %llu\n", name.c_str(),
              kTrainSteps - kTimedFrom, static_cast<unsigned long long>(eager.driver_allocations),
              static_cast<unsigned long long>(compiled.driver_allocations));
  return j;
}

}  // namespace

int run_bench_gpu_real(const BenchOptions& opts) {
  Device d = opts.device;
  std::string cache_dir =
      (std::filesystem::temp_directory_path() / ("kiln-bench-gpu-real-cache-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(cache_dir);
  set_disk_cache_dir(cache_dir);
  ::setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);  // for the fresh processes of the warm compiles
  set_float32_matmul_precision(Float32MatmulPrecision::high);
  std::optional<DType> autocast = autocast_of(opts.precision);
  KILN_CHECK(!autocast || opts.only == "models", "kiln bench gpu: --precision ", opts.precision, " applies to the "
             "models (--only models); the real-size kernels are f32 kernels");
  KILN_CHECK(!autocast || opts.check_dir.empty(), "kiln bench gpu: --check-dir compares the first step in full f32; "
             "run it without --precision");
  double t0 = now_seconds();
  compile([](const Tensor& x) { return x + 1.0; }, {.backend = "halide"})(full({4}, 1.0, {.device = d}));
  std::printf("device %s, real sizes, TF32 matmuls%s; disk cache %s (Halide runtime and CUDA context in %.2f s)\n",
              cuda_context(d.index).name.c_str(), autocast ? (", models under " + opts.precision + " autocast").c_str() : "",
              cache_dir.c_str(), now_seconds() - t0);
  Json report = Json::object();
  report.set("suite", "gpu");
  report.set("size", "real");
  report.set("device", cuda_context(d.index).name);
  report.set("precision", opts.precision);
  double copy = copy_gbps(d);
  report.set("copy_gbps", copy);
  auto save = [&] {
    if (!opts.json_path.empty()) write_file_atomic(opts.json_path, report.dump());
  };

  std::printf("device-to-device copy: %.0f GB/s\n\n%-28s %-16s %13s %11s %8s %15s\n", copy, "kernel", "shape",
              "compiled GB/s", "eager GB/s", "of copy", "of same bytes");
  KILN_CHECK(opts.only.empty() || opts.only == "kernels" || opts.only == "models" || opts.only == "attention" ||
                 opts.only == "precision",
             "kiln bench gpu: --only takes kernels, models, attention or precision, not '", opts.only, "'");
  if (opts.only == "precision") {  // its own run: three GPT-2 trainings
    report.set("precision_check", compare_precisions(d, opts.steps));
    save();
    if (!opts.json_path.empty()) std::printf("wrote %s\n", opts.json_path.c_str());
    std::filesystem::remove_all(cache_dir);
    return 0;
  }
  if (opts.only.empty() || opts.only == "attention") {
    report.set("attention", measure_attention(d));
    save();
  }
  KILN_CHECK(opts.profile == "train" || opts.profile == "inference",
             "kiln bench gpu: --profile takes train or inference, not '", opts.profile, "'");
  Json kernels = Json::array();
  for (RealKernel& k : real_kernels(d)) {
    if (opts.only == "models" || opts.only == "attention") break;
    if (!opts.filter.empty() && k.name.find(opts.filter) == std::string::npos) continue;
    NoGradGuard no_grad;
    std::vector<Tensor> in = k.inputs();
    zoo::ZooFunction f(k.fn, {.backend = "halide", .name = k.name});
    f(in);
    double compiled = gbps(k.bytes, device_ms([&] { f(in); }, 3, 20, 0.2));
    double eager = gbps(k.bytes, device_ms([&] { k.fn(in); }, 3, 20, 0.2));
    double same_bytes_copy = copy_gbps(d, k.bytes);
    std::printf("%-28s %-16s %13.0f %11.0f %8.2f %15.2f\n", k.name.c_str(), to_string(k.shape).c_str(), compiled, eager,
                compiled / copy, compiled / same_bytes_copy);
    Json j = Json::object();
    j.set("name", k.name);
    Json shape = Json::array();
    for (int64_t s : k.shape) shape.push(s);
    j.set("shape", shape);
    j.set("bytes", k.bytes);
    j.set("kiln_gbps", compiled);
    j.set("kiln_eager_gbps", eager);
    j.set("fraction_of_copy", compiled / copy);
    j.set("same_bytes_copy_gbps", same_bytes_copy);
    j.set("fraction_of_same_bytes_copy", compiled / same_bytes_copy);
    kernels.push(j);
  }
  report.set("kernels", kernels);
  save();

  Json models = Json::array();
  StepTables tables;
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::real)) {
    if (opts.only == "kernels" || opts.only == "attention") break;
    if (!opts.filter.empty() && name.find(opts.filter) == std::string::npos) continue;
    models.push(measure_model(name, opts, tables));
    report.set("models", models);
    tables.put(report);
    save();
  }
  report.set("models", models);
  tables.put(report);
  save();
  if (!opts.json_path.empty()) std::printf("wrote %s\n", opts.json_path.c_str());
  std::filesystem::remove_all(cache_dir);
  return 0;
}

}  // namespace kiln::bench
