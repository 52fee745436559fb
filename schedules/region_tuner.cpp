#include "schedules/region_tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <unistd.h>

#include "dsl/error.h"
#include "dsl/storage.h"
#include "graph/backend.h"
#include "schedules/cpu_tuning.h"
#include "schedules/region_build.h"
#include "schedules/region_schedule.h"
#include "schedules/region_signature.h"
#include "schedules/schedule_source.h"
#include "schedules/shared_library.h"

namespace kiln {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A copy of t with the same layout (strides and offset): a region's pipeline reads its inputs
// through the layouts it was compiled for.
Tensor layout_copy(const Tensor& t) {
  const Storage& from = *t.storage();
  std::shared_ptr<Storage> to = Storage::allocate(from.nbytes, from.device);
  if (from.nbytes > 0) std::memcpy(to->data, from.data, from.nbytes);
  return Tensor::make_view(std::move(to), t.shape(), t.strides(), t.storage_offset(), t.dtype());
}

// The values the tunables take in the search, the default among them.
std::vector<int64_t> candidate_values(const CpuTunable& t) {
  std::string_view d = t.directive;
  if (d == "cpu.task.elements") return {1 << 12, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 20};
  if (d == "cpu.parallel") return {0, 1};
  if (d == "cpu.vector.scale") return {1, 2, 4};
  if (d == "cpu.row.partials") return {1, 2, 4, 8};
  if (d == "cpu.transpose.tile") return {32, 64, 128, 256};
  if (d == "cpu.column.task") return {32, 64, 128, 256, 512};
  return {};
}

// The directives of `t` that differ from the defaults, one a line.
std::string schedule_text(const CpuTuning& t) {
  CpuTuning d;
  std::string out;
  for (const CpuTunable& u : cpu_tunables())
    if (u.get(t) != u.get(d)) out += std::string(u.directive) + " " + std::to_string(u.get(t)) + "\n";
  return out;
}

// A region rebuilt alone with a schedule and compiled as the halide backend compiles a graph's
// regions (an object without a runtime, linked into a shared library and loaded), so it runs
// with the same runtime and thread pool as in the model.
struct Built {
  std::string source;  // its schedule as Halide C++, canonical (equal sources: the same code)
  std::shared_ptr<SharedLibrary> library;
  RegionFunction function = nullptr;
};

Built build(const RecordedRegion& r, const std::string& schedule) {
  static std::atomic<int> counter{0};
  RegionStep s;
  s.node = -1;
  s.region = r.region;
  if (!schedule.empty()) s.own_schedule = parse_region_schedule(schedule, "the candidate schedule of region " + r.key);
  BackendOptions o;
  o.scheduler = "kiln";
  o.label = "tune_" + r.key;
  build_region(*r.graph, s, o, 0);
  Built b;
  b.source = canonical_schedule_source(schedule_source(s.lowered.outputs));
  std::string name = "kiln_tune_" + std::to_string(counter++);
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln-tune-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string object = (dir / (name + ".o")).string(), library = (dir / (name + ".so")).string();
  compile_region_object(s.pipeline, pipeline_arguments(s.region, s.lowered), name, object, false);
  link_shared_library({object}, library);
  b.library = std::make_shared<SharedLibrary>(library);  // stays mapped once its file is gone
  b.function = b.library->function(name);
  std::filesystem::remove(object);
  std::filesystem::remove(library);
  return b;
}

// Runs a built region on the recorded inputs into `outputs`; times it: the median of repeats
// after a warm-up, repeated until about 0.15 s have passed (5 to 51 runs).
double time_ms(const RecordedRegion& r, const Built& b, const std::vector<Tensor>& outputs) {
  std::vector<Tensor> buffers = r.inputs;
  buffers.insert(buffers.end(), outputs.begin(), outputs.end());
  auto run = [&] { run_region_function(b.function, *b.library, r.region, buffers, r.sizes); };
  run();
  std::vector<double> ms;
  auto start = std::chrono::steady_clock::now();
  while (ms.size() < 5 || (ms.size() < 51 && seconds_since(start) < 0.15)) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(seconds_since(t0) * 1e3);
  }
  std::nth_element(ms.begin(), ms.begin() + long(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

std::vector<Tensor> fresh_outputs(const RecordedRegion& r) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < r.output_shapes.size(); ++k) out.push_back(Tensor::empty(r.output_shapes[k], {r.output_dtypes[k]}));
  return out;
}

// Whether a candidate's outputs match the default's: floating point within a relative tolerance
// for its width (a different summation order rounds differently), integers exactly.
bool same_results(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  for (size_t k = 0; k < got.size(); ++k) {
    Tensor a = got[k].to(DType::f64).contiguous(), b = want[k].to(DType::f64).contiguous();
    const double* x = static_cast<const double*>(a.data_ptr());
    const double* y = static_cast<const double*>(b.data_ptr());
    DType t = want[k].dtype();
    double rtol = t == DType::f64 ? 1e-10 : t == DType::f32 ? 1e-4 : is_floating(t) ? 2e-2 : 0.0;
    double atol = rtol * 0.1;
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (std::isnan(x[i]) && std::isnan(y[i])) continue;
      if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
    }
  }
  return true;
}

}  // namespace

RegionRecorder::RegionRecorder() {
  observer_ = [this](const std::shared_ptr<const Graph>& g, const ExecutorStep& s, const std::vector<Tensor>& buffers,
                     const std::vector<int32_t>& sizes) {
    if (buffers.empty() || !buffers[0].device().is_cpu()) return;
    std::string key = region_schedule_key(region_signature(*g, s.region));
    for (RecordedRegion& r : regions_)
      if (r.key == key) {
        ++r.calls;
        return;
      }
    RecordedRegion& r = regions_.emplace_back();
    r.graph = g;
    r.region = s.region;
    r.key = key;
    r.what = step_what(*g, s);
    r.calls = 1;
    r.sizes = sizes;
    size_t n_in = s.region.inputs.size();
    for (size_t k = 0; k < buffers.size(); ++k) {
      if (k < n_in) {
        r.inputs.push_back(layout_copy(buffers[k]));
      } else {
        r.output_shapes.push_back(buffers[k].shape());
        r.output_dtypes.push_back(buffers[k].dtype());
      }
    }
  };
  saved_ = exchange_region_observer(&observer_);
}

RegionRecorder::~RegionRecorder() { exchange_region_observer(saved_); }

TuneResult tune_region(const RecordedRegion& r, const TuneOptions& options,
                       const std::function<void(const std::string&)>& progress) {
  auto start = std::chrono::steady_clock::now();
  TuneResult out;
  out.key = r.key;
  out.what = r.what;
  out.calls = r.calls;
  std::vector<Tensor> want = fresh_outputs(r), got = fresh_outputs(r);
  Built plain = build(r, "");
  // Three medians of the default: the middle one is its time, its distance from the lowest the
  // noise (one disturbed measurement, common on a shared 2-core machine, does not set either).
  std::vector<double> medians;
  for (int i = 0; i < 3; ++i) medians.push_back(time_ms(r, plain, want));
  std::sort(medians.begin(), medians.end());
  out.default_ms = medians[1];
  out.noise = (medians[1] - medians[0]) / std::max(medians[0], 1e-9);
  double threshold = std::max(options.min_gain, out.noise);
  std::map<std::string, double> timed{{plain.source, out.default_ms}};  // by schedule source
  CpuTuning best;
  double best_ms = out.default_ms;
  bool improved = true;
  while (improved && seconds_since(start) < options.budget_s) {
    improved = false;
    for (const CpuTunable& u : cpu_tunables()) {
      for (int64_t v : candidate_values(u)) {
        if (v == u.get(best) || seconds_since(start) >= options.budget_s) continue;
        CpuTuning c = best;
        u.set(c, v);
        std::string text = schedule_text(c);
        Built built;
        try {
          built = build(r, text);
        } catch (const std::exception& e) {  // a value this region's schedule cannot take
          if (progress) progress("  " + std::string(u.directive) + " " + std::to_string(v) + ": does not build (" + e.what() + ")");
          continue;
        }
        if (timed.count(built.source)) continue;  // the same code as a schedule already timed
        double ms = time_ms(r, built, got);
        timed[built.source] = ms;
        ++out.trials;
        if (!same_results(got, want)) {
          ++out.rejected;
          if (progress) progress("  " + std::string(u.directive) + " " + std::to_string(v) + ": outputs differ from the default's; rejected");
          continue;
        }
        if (ms < best_ms * (1 - threshold)) {
          best = c;
          best_ms = ms;
          improved = true;
        }
        out.history.push_back({out.trials, ms, best_ms});
        if (progress) {
          char line[160];
          std::snprintf(line, sizeof line, "  trial %d: %s %lld: %.4f ms (best %.4f ms, %.2fx)", out.trials,
                        u.directive, static_cast<long long>(v), ms, best_ms, out.default_ms / best_ms);
          progress(line);
        }
      }
    }
  }
  out.schedule = schedule_text(best);
  out.tuned_ms = out.default_ms;
  if (!out.schedule.empty()) {
    // The winner measured again beside the default: a lucky median is not kept.
    Built tuned = build(r, out.schedule);
    double d = std::min(time_ms(r, plain, want), out.default_ms), t = time_ms(r, tuned, got);
    if (t < d * (1 - threshold)) {
      out.default_ms = d;
      out.tuned_ms = t;
    } else {
      out.schedule.clear();
    }
  }
  return out;
}

std::string tuned_schedule_text(const TuneResult& t, const std::string& machine) {
  char line[256];
  std::snprintf(line, sizeof line, "# %s: kiln's schedule %.4f ms, this one %.4f ms (%.2fx), %d candidates timed\n",
                machine.c_str(), t.default_ms, t.tuned_ms, t.default_ms / std::max(t.tuned_ms, 1e-9), t.trials);
  return "# kiln tune: " + t.what + "\n" + line + t.schedule;
}

}  // namespace kiln
