// `kiln tune MODEL`: tunes the schedules of a zoo model's compiled regions on this CPU or a CUDA
// device (issue 25;
// schedules/region_tuner.h does the search). One compiled call records the regions it runs with
// their inputs; each distinct region is tuned alone within its share of --budget (a progress line
// per region); the schedules that beat kiln's default are written as <key>.schedule into --db
// (default: the folder KILN_SCHEDULE_DIR names, else <kiln cache>/schedules), and the model is
// compiled again from that folder and timed beside its default build in the same process.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/settings.h"
#include "kiln.h"
#include "schedules/disk_cache.h"
#include "schedules/region_tuner.h"

namespace kiln::bench {

namespace {

// "AMD EPYC 7B13 (2 threads)": what the tuning was measured on.
std::string machine_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "an unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      name = line.substr(line.find(':') + 2);
      break;
    }
  return name + " (" + std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " threads)";
}

// The model's compiled call: its forward, or its whole training step with AdamW.
struct Model {
  zoo::ZooModel m;
  TensorList in;
  std::shared_ptr<optim::AdamW> opt;
};

// A call waits for the device, so its time is the device's too.
std::function<void()> compiled_call(Model& md, bool train, const std::string& name, Device device) {
  auto wait = [device] {
    if (device.is_cuda()) cuda_synchronize(device.index);
  };
  if (train) {
    auto step = std::make_shared<CompiledFunction<TensorList(std::vector<Tensor>)>>(
        [&md](std::vector<Tensor> xs) { return TensorList{train_step(md.m, *md.opt, xs)}; },
        CompileOptions{.backend = "halide", .name = name});
    return [&md, step, wait] {
      (*step)(md.in);
      wait();
    };
  }
  auto f = std::make_shared<zoo::ZooFunction>(zoo::compile_zoo_model(md.m, {.backend = "halide", .name = name}));
  return [&md, f, wait] {
    NoGradGuard no_grad;
    (*f)(md.in);
    wait();
  };
}

double median_ms(const std::function<void()>& call) { return time_median(call, 1, 3, 11, 0.5, 200).median_s * 1e3; }

}  // namespace

int run_tune(const BenchOptions& opts, double budget_s, const std::string& db, bool verbose) {
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "kiln tune: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  KILN_CHECK(budget_s > 0, "kiln tune: --budget must be positive seconds");
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
  if (size == zoo::ZooSize::real) set_float32_matmul_precision(Float32MatmulPrecision::high);  // TF32, as the real-size bench
  std::string dir = !db.empty() ? db : setting("KILN_SCHEDULE_DIR").value_or((std::filesystem::path(disk_cache_dir()) / "schedules").string());
  std::filesystem::create_directories(dir);
  manual_seed(0);
  Model md{zoo::make_zoo_model(opts.filter, size, opts.device), {}, nullptr};
  md.in = md.m.make_inputs();
  md.opt = std::make_shared<optim::AdamW>(md.m.module->parameters(), optim::AdamWOptions{});
  std::string what = md.m.name + (opts.train ? " training step" : " forward");
  std::string machine = opts.device.is_cuda() ? cuda_context(opts.device.index).name : machine_name();
  std::printf("kiln tune: %s (%s) on %s, budget %.0f s, schedules into %s\n", what.c_str(), md.m.description.c_str(),
              machine.c_str(), budget_s, dir.c_str());

  // The default build, without any schedule file, and its regions with their inputs.
  std::optional<std::string> saved = setting("KILN_SCHEDULE_DIR");
  ::unsetenv("KILN_SCHEDULE_DIR");
  std::function<void()> plain = compiled_call(md, opts.train, md.m.name + " default", opts.device);
  plain();
  std::vector<RecordedRegion> regions;
  {
    RegionRecorder recorder;
    plain();
    regions = recorder.regions();
  }
  double default_ms = median_ms(plain);
  std::printf("default schedules: %.3f ms a call, %zu distinct regions\n", default_ms, regions.size());

  auto t0 = std::chrono::steady_clock::now();
  Json rows = Json::array();
  int trials = 0, written = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double share = (budget_s - spent) / double(regions.size() - i);
    const RecordedRegion& r = regions[i];
    std::printf("region %zu/%zu %s: %s, %d call%s\n", i + 1, regions.size(), r.key.c_str(), r.what.c_str(), r.calls,
                r.calls == 1 ? "" : "s");
    TuneResult t = tune_region(r, {.budget_s = std::max(share, 1.0)}, [verbose](const std::string& line) {
      if (verbose) std::printf("%s\n", line.c_str());
    });
    trials += t.trials;
    std::string path = (std::filesystem::path(dir) / (r.key + ".schedule")).string();
    if (!t.schedule.empty()) {
      write_file_atomic(path, tuned_schedule_text(t, machine));
      ++written;
    }
    std::printf("  default %.4f ms, tuned %.4f ms (%.2fx), %d candidates timed, %d rejected, noise %.1f%%%s%s\n",
                t.default_ms, t.tuned_ms, t.default_ms / t.tuned_ms, t.trials, t.rejected, 100 * t.noise,
                t.schedule.empty() ? "; kiln's schedule kept" : "; wrote ", t.schedule.empty() ? "" : path.c_str());
    Json row = Json::object();
    row.set("signature", r.key);
    row.set("what", r.what);
    row.set("calls", r.calls);
    row.set("default_ms", t.default_ms);
    row.set("tuned_ms", t.tuned_ms);
    row.set("trials", t.trials);
    row.set("rejected", t.rejected);
    row.set("noise", t.noise);
    row.set("schedule", t.schedule);
    Json history = Json::array();
    for (const TuneTrial& h : t.history) history.push(Json::array().push(h.trial).push(h.ms).push(h.best_ms));
    row.set("history", history);
    rows.push(row);
  }

  // The model again, compiled from the tuned schedules, timed beside the default build.
  ::setenv("KILN_SCHEDULE_DIR", dir.c_str(), 1);
  std::function<void()> tuned = compiled_call(md, opts.train, md.m.name + " tuned", opts.device);
  tuned();
  // Alternating rounds, each build's time the median of its rounds' medians: a machine that
  // slows down for a while does not favour the one timed then.
  std::vector<double> plain_rounds, tuned_rounds;
  for (int round = 0; round < 3; ++round) {
    plain_rounds.push_back(median_ms(plain));
    tuned_rounds.push_back(median_ms(tuned));
  }
  std::sort(plain_rounds.begin(), plain_rounds.end());
  std::sort(tuned_rounds.begin(), tuned_rounds.end());
  default_ms = plain_rounds[1];
  double tuned_ms = tuned_rounds[1];
  if (saved) ::setenv("KILN_SCHEDULE_DIR", saved->c_str(), 1);
  else ::unsetenv("KILN_SCHEDULE_DIR");
  std::printf("%s: default %.3f ms, tuned %.3f ms (%.2fx); %d candidates timed, %d schedules written, %.0f s\n",
              what.c_str(), default_ms, tuned_ms, default_ms / tuned_ms, trials, written,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!opts.json_path.empty()) {
    Json report = Json::object();
    report.set("suite", "tune");
    report.set("model", md.m.name);
    report.set("train", opts.train);
    report.set("device", opts.device.str());
    report.set("machine", machine);
    report.set("budget_s", budget_s);
    report.set("trials", trials);
    report.set("default_ms", default_ms);
    report.set("tuned_ms", tuned_ms);
    report.set("regions", rows);
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
