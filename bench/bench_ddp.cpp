// `kiln bench ddp`: collectives and data-parallel training across processes (dsl/distributed/).
// The command starts its workers with distributed::launch, once on one process and once on N:
// each worker times all_reduce per message size (bus bandwidth as NCCL's tests report it: the
// algorithm bandwidth times 2(n-1)/n) and a DistributedDataParallel training step of a zoo model
// (the MLP at bench size on the CPU, GPT-2 small at real size on CUDA, the same batch per rank),
// eager and compiled (the halide backend: one graph whose backward holds the buckets' all-reduces),
// in a world of one also the compiled step without DDP (what DDP costs with nothing to exchange),
// and rank 0 writes its part; the command merges them into the table, the scaling efficiency
// (samples/s on N processes over N times one process's) and the JSON report.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "graph/compile.h"
#include "dsl/distributed/ddp.h"
#include "dsl/distributed/launch.h"
#include "dsl/distributed/process_group.h"
#include "dsl/eager/cublas_gemm.h"
#include "dsl/settings.h"

namespace kiln::bench {

namespace {

void sync(Device d) {
  if (d.is_cuda()) cuda_synchronize(d.index);
}

// The median of `samples` timings of `iterations` calls of fn each, per call, in seconds. The
// counts are fixed (not a time budget): every rank must issue the same collectives.
double median_per_call(const std::function<void()>& fn, Device d, int iterations, int samples) {
  for (int i = 0; i < 2; ++i) fn();
  sync(d);
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    double t0 = now_seconds();
    for (int i = 0; i < iterations; ++i) fn();
    sync(d);
    t.push_back((now_seconds() - t0) / iterations);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int run_bench_ddp_worker(const BenchOptions& opts, const std::string& part_path) {
  distributed::init_process_group();
  const int rank = distributed::rank(), world = distributed::world_size();
  // On CUDA the launcher gave each rank one GPU (CUDA_VISIBLE_DEVICES): cuda:0.
  Device device = opts.device.is_cuda() ? Device::cuda(0) : Device::cpu();
  Json part = Json::object();
  part.set("world_size", world);
  Json sizes = Json::array();
  const int64_t max_bytes = device.is_cuda() ? (int64_t(256) << 20) : (int64_t(64) << 20);
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    Tensor t = randn({bytes / 4}, {.device = device});
    int iterations = int(std::clamp<int64_t>((int64_t(64) << 20) / bytes, 1, 50));
    double s = median_per_call([&] { distributed::all_reduce(t); }, device, iterations, 7);
    double algbw = double(bytes) / s / 1e9;
    Json row = Json::object();
    row.set("bytes", bytes).set("ms", s * 1e3).set("algbw_gbps", algbw).set("busbw_gbps", algbw * 2 * (world - 1) / world);
    sizes.push(row);
  }
  part.set("all_reduce", sizes);

  const std::string model = device.is_cuda() ? "gpt2_small" : "mlp";
  if (device.is_cuda()) set_float32_matmul_precision(Float32MatmulPrecision::high);  // TF32, as the real-size bench
  zoo::ZooModel m = zoo::make_zoo_model(model, device.is_cuda() ? zoo::ZooSize::real : zoo::ZooSize::bench, device);
  TensorList inputs = m.make_inputs();
  int64_t samples = inputs.at(0).size(0);
  Json step = Json::object();
  {
    distributed::DistributedDataParallel ddp(m.module);
    optim::AdamW opt(ddp.parameters(), {});
    double step_s = median_per_call([&] { train_step(m, opt, inputs); }, device, 1, 15);
    // The step compiled on the halide backend: one graph, the buckets' all-reduces its nodes.
    auto compiled = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs); }, {.backend = "halide"});
    double t0 = now_seconds();
    compiled(inputs);
    sync(device);
    double compile_s = now_seconds() - t0;
    double compiled_s = median_per_call([&] { compiled(inputs); }, device, 1, 15);
    step.set("model", model).set("batch_per_rank", samples).set("buckets", int64_t(ddp.buckets().size()));
    step.set("ms", step_s * 1e3).set("samples_per_s", double(samples * world) / step_s);
    step.set("compiled_ms", compiled_s * 1e3).set("compiled_samples_per_s", double(samples * world) / compiled_s);
    step.set("compile_s", compile_s).set("compiled_graphs", int64_t(compiled.stats().compiles));
  }
  if (world == 1) {
    // The same compiled step without DDP (the wrapper took its hooks with it): what DDP costs
    // where there is nothing to exchange.
    optim::AdamW opt(m.module->parameters(), {});
    auto plain = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs); }, {.backend = "halide"});
    plain(inputs);
    step.set("plain_compiled_ms", median_per_call([&] { plain(inputs); }, device, 1, 15) * 1e3);
  }
  part.set("train_step", step);
  if (rank == 0) {
    std::ofstream(part_path) << part.dump() << "\n";
  }
  distributed::barrier();
  distributed::destroy_process_group();
  return 0;
}

int run_bench_ddp(const BenchOptions& opts, int nproc) {
  KILN_CHECK(nproc >= 1, "kiln bench ddp: --nproc must be at least 1");
  std::vector<int> worlds{1};
  if (nproc > 1) worlds.push_back(nproc);
  Json report = Json::object();
  report.set("suite", "ddp").set("device", opts.device.str()).set("engine", opts.device.is_cuda() ? "nccl" : "gloo");
  Json runs = Json::array();
  std::vector<Json> parts;
  for (int world : worlds) {
    std::string part = (std::filesystem::temp_directory_path() /
                        ("kiln-bench-ddp-" + std::to_string(::getpid()) + "-" + std::to_string(world) + ".json")).string();
    std::printf("kiln bench ddp: %d process%s on %s\n", world, world == 1 ? "" : "es", opts.device.str().c_str());
    int rc = distributed::launch({opts.self_path, "bench", "ddp-worker", part, "--device", opts.device.str()},
                                 {.nproc = world, .one_gpu_each = opts.device.is_cuda()});
    KILN_CHECK(rc == 0, "kiln bench ddp: the workers on ", world, " processes failed (status ", rc, ")");
    std::ifstream in(part);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(part.c_str());
    parts.push_back(Json::parse(text.str(), part));
    runs.push(parts.back());
  }
  std::printf("\nall_reduce (f32, sum), median per call:\n%12s", "bytes");
  for (const Json& p : parts) std::printf("  %10s %9s", ("ms n=" + std::to_string(int(p["world_size"].number()))).c_str(), "busbw GB/s");
  std::printf("\n");
  for (size_t i = 0; i < parts[0]["all_reduce"].size(); ++i) {
    std::printf("%12.0f", parts[0]["all_reduce"][i]["bytes"].number());
    for (const Json& p : parts) std::printf("  %10.4f %9.2f", p["all_reduce"][i]["ms"].number(), p["all_reduce"][i]["busbw_gbps"].number());
    std::printf("\n");
  }
  const Json& one = parts.front()["train_step"];
  std::printf("\n%s DDP training step, batch %.0f per process (eager | compiled, halide backend):\n",
              one["model"].str().c_str(), one["batch_per_rank"].number());
  for (const Json& p : parts) {
    const Json& s = p["train_step"];
    double world = p["world_size"].number();
    double efficiency = s["samples_per_s"].number() / (world * one["samples_per_s"].number());
    double compiled_efficiency = s["compiled_samples_per_s"].number() / (world * one["compiled_samples_per_s"].number());
    std::printf("  %2.0f process%s: %8.2f ms a step, %10.1f samples/s, scaling %.2f | %8.2f ms, %10.1f samples/s, "
                "scaling %.2f (%.0f graph%s)\n", world, world == 1 ? "  " : "es", s["ms"].number(),
                s["samples_per_s"].number(), efficiency, s["compiled_ms"].number(), s["compiled_samples_per_s"].number(),
                compiled_efficiency, s["compiled_graphs"].number(), s["compiled_graphs"].number() == 1 ? "" : "s");
  }
  if (one.has("plain_compiled_ms"))
    std::printf("  without DDP, 1 process: %8.2f ms a step compiled (DDP's cost where there is nothing to exchange: %.2f ms)\n",
                one["plain_compiled_ms"].number(), one["compiled_ms"].number() - one["plain_compiled_ms"].number());
  report.set("runs", runs);
  if (!opts.json_path.empty()) {
    std::ofstream(opts.json_path) << report.dump() << "\n";
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
