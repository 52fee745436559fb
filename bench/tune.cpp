// `kiln tune MODEL`: tunes the schedules of a zoo model's compiled regions on this CPU or a CUDA
// device (issue 25; schedules/region_tuner.h does the search). One compiled call records the
// regions it runs with their inputs; each distinct region is tuned alone within its share of
// --budget (a progress line per region); the schedules that beat kiln's default are written as
// records of the tuning database (schedules/tuning_db.h; --db names its folder), and the model is
// compiled again from it and timed beside its default build in the same process. Each region's
// time is also set against its bound (bench/region_bound.h: a copy of the bytes it must move, its
// GEMM flops at the measured rate), and the regions' distance from their bounds gives the most
// any region schedule could save of a call.
// `kiln tune --defaults` measures this machine's eager GEMM choice into the same database.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/region_bound.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/eager/matmul.h"
#include "dsl/settings.h"
#include "kiln.h"
#include "schedules/region_tuner.h"
#include "schedules/tuning_db.h"

namespace kiln::bench {

namespace {

// The model's compiled call: its forward, or its whole training step with AdamW.
struct Model {
  zoo::ZooModel m;
  TensorList in;
  std::shared_ptr<optim::AdamW> opt;
};

// A call waits for the device, so its time is the device's too. `scheduler`: kiln's, or one of
// Halide's autoschedulers.
std::function<void()> compiled_call(Model& md, bool train, const std::string& name, Device device,
                                    const std::string& scheduler = "kiln") {
  auto wait = [device] {
    if (device.is_cuda()) cuda_synchronize(device.index);
  };
  if (train) {
    auto step = std::make_shared<CompiledFunction<TensorList(std::vector<Tensor>)>>(
        [&md](std::vector<Tensor> xs) { return TensorList{train_step(md.m, *md.opt, xs)}; },
        CompileOptions{.backend = "halide", .scheduler = scheduler, .name = name});
    return [&md, step, wait] {
      (*step)(md.in);
      wait();
    };
  }
  auto f = std::make_shared<zoo::ZooFunction>(zoo::compile_zoo_model(md.m, {.backend = "halide", .scheduler = scheduler, .name = name}));
  return [&md, f, wait] {
    NoGradGuard no_grad;
    (*f)(md.in);
    wait();
  };
}

double median_ms(const std::function<void()>& call) { return time_median(call, 1, 3, 11, 0.5, 200).median_s * 1e3; }

// The eager GEMM's backend choice for the calls that follow: kiln's built-in rule (its default) or
// this machine's, measured once into the tuning database (tuned).
void use_measured_gemm_choice(bool measured) {
  set_gemm_choice_source(measured ? std::function<std::optional<GemmChoice>()>(machine_gemm_choice_from_db) : nullptr);
}

}  // namespace

int run_tune(const BenchOptions& opts, double budget_s, const std::string& db, bool verbose, bool skip_autoschedulers) {
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "kiln tune: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  KILN_CHECK(budget_s > 0, "kiln tune: --budget must be positive seconds");
  // Before any kernel starts Halide's thread pool, which inherits it: a training step repeated on
  // one batch otherwise slows down as its gradients shrink into denormals, and the builds timed
  // later in the run look slower (dsl/flush_denormal.h).
  bool flushed = set_flush_denormal(true);
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
  if (size == zoo::ZooSize::real) set_float32_matmul_precision(Float32MatmulPrecision::high);  // TF32, as the real-size bench
  TuningDbScope database(!db.empty() ? db : tuning_db_dir());
  std::string dir = tuning_db_dir();
  KILN_CHECK(!dir.empty(), "kiln tune: no tuning database folder (--db DIR names one)");
  std::filesystem::create_directories(dir);
  manual_seed(0);
  Model md{zoo::make_zoo_model(opts.filter, size, opts.device), {}, nullptr};
  md.in = md.m.make_inputs();
  md.opt = std::make_shared<optim::AdamW>(md.m.module->parameters(), optim::AdamWOptions{});
  std::string what = md.m.name + (opts.train ? " training step" : " forward");
  std::string machine = tuning_device_name(opts.device);
  std::printf("kiln tune: %s (%s) on %s, budget %.0f s, tuning database %s%s\n", what.c_str(), md.m.description.c_str(),
              machine.c_str(), budget_s, dir.c_str(), flushed && opts.device.is_cpu() ? "; denormals flushed to zero" : "");

  // The default build, without schedule files or database records, and its regions with their inputs.
  std::optional<std::string> saved = setting("KILN_SCHEDULE_DIR");
  ::unsetenv("KILN_SCHEDULE_DIR");
  std::function<void()> plain;
  use_measured_gemm_choice(false);
  {
    TuningDbScope off(std::nullopt);
    plain = compiled_call(md, opts.train, md.m.name + " default", opts.device);
    plain();
  }
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
  DeviceRates rates = measure_device_rates(opts.device);
  double regions_default_ms = 0, regions_tuned_ms = 0, regions_bound_ms = 0;  // per call: time x calls
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
    std::string path;
    if (!t.schedule.empty()) {
      path = write_tuning_record("region", r.signature, machine, tuned_schedule_text(t, machine));
      ++written;
    }
    std::printf("  default %.4f ms, tuned %.4f ms (%.2fx), %d candidates timed, %d rejected, noise %.1f%%%s%s\n",
                t.default_ms, t.tuned_ms, t.default_ms / t.tuned_ms, t.trials, t.rejected, 100 * t.noise,
                t.schedule.empty() ? "; kiln's schedule kept" : "; wrote ", t.schedule.empty() ? "" : path.c_str());
    RegionTraffic traffic = region_traffic(r);
    RegionBoundResult bound = region_bound(traffic, rates);
    std::printf("  moves %.1f MB%s: bound %.4f ms (%s); default at %.2f of it, tuned at %.2f%s\n", traffic.bytes / 1e6,
                traffic.flops > 0 ? (", " + std::to_string(int64_t(traffic.flops / 1e6)) + " MFLOP").c_str() : "",
                bound.bound_ms, bound.limit.c_str(), bound.bound_ms / t.default_ms, bound.bound_ms / t.tuned_ms,
                bound.bound_ms > t.default_ms ? " (faster than its bytes: it reads part of an input)" : "");
    regions_default_ms += t.default_ms * r.calls;
    regions_tuned_ms += t.tuned_ms * r.calls;
    // A bound above the region's time overstates what it reads (a gather reads a few rows of its
    // table, a view part of its input): there the region's own time is the bound.
    regions_bound_ms += std::min(bound.bound_ms, t.default_ms) * r.calls;
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
    row.set("bytes", traffic.bytes);
    row.set("flops", traffic.flops);
    row.set("bound_ms", bound.bound_ms);
    row.set("bound", bound.limit);
    Json history = Json::array();
    for (const TuneTrial& h : t.history) history.push(Json::array().push(h.trial).push(h.ms).push(h.best_ms));
    row.set("history", history);
    rows.push(row);
  }

  // The eager GEMMs: on the CPU, this machine's measured Halide/Eigen choice against the built-in rule.
  std::optional<GemmChoice> gemm;
  if (opts.device.is_cpu()) {
    use_measured_gemm_choice(true);
    gemm = machine_gemm_choice();
    std::printf("eager GEMM: this machine's measured choice (tuning database)\n%s", gemm ? gemm->text().c_str() : "none\n");
  }

  // The model again, compiled with the database's records, timed beside the default build; on
  // the CPU also with Halide's autoschedulers (their schedules for every region, the measured GEMM choice).
  std::function<void()> tuned = compiled_call(md, opts.train, md.m.name + " tuned", opts.device);
  tuned();
  struct Build {
    std::string name;
    std::function<void()> call;
    bool measured_gemm;
    std::vector<double> rounds;
  };
  // A second default build, timed like the others: how far two identical builds land apart on
  // this machine (memory placement, neighbours), the floor below which a gain is not a gain.
  std::function<void()> control;
  {
    TuningDbScope off(std::nullopt);
    use_measured_gemm_choice(false);
    control = compiled_call(md, opts.train, md.m.name + " default again", opts.device);
    control();
  }
  std::vector<Build> builds = {{"default", plain, false, {}}, {"tuned", tuned, true, {}}, {"control", control, false, {}}};
  if (opts.device.is_cpu() && !skip_autoschedulers)
    for (const char* scheduler : {"adams2019", "mullapudi2016"}) {
      use_measured_gemm_choice(true);  // as the tuned build: only the regions' schedules differ
      TuningDbScope off(std::nullopt);
      auto c0 = std::chrono::steady_clock::now();
      std::function<void()> call = compiled_call(md, opts.train, md.m.name + " " + scheduler, opts.device, scheduler);
      call();
      std::printf("%s: compiled in %.1f s\n", scheduler, std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
      builds.push_back({scheduler, call, true, {}});
    }
  // Alternating rounds, each build's time the median of its rounds' medians: a machine that
  // slows down for a while does not favour the one timed then. (norm_softmax's training step ran
  // at 8.8 ms in some rounds and 15.3 ms in others on a 2-core EPYC, whatever its schedule.)
  const int kRounds = 5;
  for (int round = 0; round < kRounds; ++round)
    for (Build& b : builds) {
      use_measured_gemm_choice(b.measured_gemm);
      b.rounds.push_back(median_ms(b.call));
    }
  use_measured_gemm_choice(true);
  auto ms_of = [&](const std::string& name) {
    for (Build& b : builds)
      if (b.name == name) {
        std::sort(b.rounds.begin(), b.rounds.end());
        return b.rounds[kRounds / 2];
      }
    return std::nan("");
  };
  default_ms = ms_of("default");
  double tuned_ms = ms_of("tuned"), control_ms = ms_of("control"), adams_ms = ms_of("adams2019"),
         mullapudi_ms = ms_of("mullapudi2016");
  double floor = std::abs(control_ms / default_ms - 1);
  if (saved) ::setenv("KILN_SCHEDULE_DIR", saved->c_str(), 1);
  else ::unsetenv("KILN_SCHEDULE_DIR");
  std::printf("%s: default %.3f ms, tuned %.3f ms (%.2fx); %d candidates timed, %d schedules written, %.0f s\n",
              what.c_str(), default_ms, tuned_ms, default_ms / tuned_ms, trials, written,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::printf("%s: a second default build %.3f ms: identical builds %.1f%% apart%s\n", what.c_str(), control_ms,
              100 * floor, std::abs(default_ms / tuned_ms - 1) <= floor ? "; the tuned build is within that" : "");
  // What the regions could give at most: each region at its bound, the rest of the call (GEMMs and
  // eager steps outside regions, launches) as it is. The regions are timed alone, so their sum can
  // exceed a call where the call overlaps them; the rest is then taken as nothing.
  double best_ms = std::max(0.0, default_ms - regions_default_ms) + regions_bound_ms;
  std::printf("%s: regions %.3f ms of the default call (each alone, times its calls), %.3f ms tuned; their bounds "
              "%.3f ms (at %.2f of them by default): every region at its bound would make the call %.3f ms (%.2fx)\n",
              what.c_str(), regions_default_ms, regions_tuned_ms, regions_bound_ms,
              regions_default_ms > 0 ? regions_bound_ms / regions_default_ms : 0.0, best_ms, default_ms / best_ms);
  if (!std::isnan(adams_ms))
    std::printf("%s: adams2019 %.3f ms (tuned %.2fx faster), mullapudi2016 %.3f ms (tuned %.2fx faster)\n", what.c_str(),
                adams_ms, adams_ms / tuned_ms, mullapudi_ms, mullapudi_ms / tuned_ms);
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
    report.set("control_ms", control_ms);
    report.set("adams2019_ms", std::isnan(adams_ms) ? Json() : Json(adams_ms));
    report.set("mullapudi2016_ms", std::isnan(mullapudi_ms) ? Json() : Json(mullapudi_ms));
    report.set("gemm_choice", gemm ? gemm->text() : std::string());
    report.set("regions", rows);
    report.set("regions_default_ms", regions_default_ms);
    report.set("regions_tuned_ms", regions_tuned_ms);
    report.set("regions_bound_ms", regions_bound_ms);
    report.set("best_possible_ms", best_ms);
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

int run_tune_defaults(const std::string& db) {
  TuningDbScope database(!db.empty() ? db : tuning_db_dir());
  KILN_CHECK(!tuning_db_dir().empty(), "kiln tune --defaults: no tuning database folder (--db DIR names one)");
  std::string machine = tuning_device_name(Device::cpu());
  std::printf("kiln tune --defaults: the eager f32 GEMM, Halide's tiled kernel against Eigen, on %s\n", machine.c_str());
  GemmChoice c = measure_gemm_choice();
  std::printf("  %6s %14s %14s  %s\n", "size^3", "Halide GFLOP/s", "Eigen GFLOP/s", "runs on");
  for (const GemmPoint& p : c.points)
    std::printf("  %6lld %14.1f %14.1f  %s\n", static_cast<long long>(p.size), p.halide_gflops, p.eigen_gflops,
                p.eigen_gflops > p.halide_gflops ? "Eigen" : "Halide");
  std::string path = write_tuning_record("gemm", "f32", machine, c.text());
  std::printf("wrote %s (every process on this machine reads it on its first GEMM)\n", path.c_str());
  return 0;
}

}  // namespace kiln::bench
