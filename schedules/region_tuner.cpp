#include "schedules/region_tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include <unistd.h>

#include "autograd/grad_mode.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"
#include "dsl/storage.h"
#include "graph/backend.h"
#include "schedules/cpu_tuning.h"
#include "schedules/gpu_row_tuning.h"
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
  Tensor copy = Tensor::make_view(std::move(to), t.shape(), t.strides(), t.storage_offset(), t.dtype());
  NoGradGuard no_grad;
  copy.copy_(t);
  return copy;
}

// A tunable as the search sees it: its directive, its value in kiln's schedule, the values it
// tries.
struct Knob {
  std::string directive;
  int64_t fallback;
  std::vector<int64_t> values;
};

// The CPU schedule's tunables, or the CUDA schedule's (their defaults from the settings), with the
// values their tables give for the search.
std::vector<Knob> knobs(bool cuda) {
  std::vector<Knob> out;
  if (!cuda) {
    CpuTuning d;
    for (const CpuTunable& t : cpu_tunables())
      if (!t.search.empty()) out.push_back({t.directive, t.get(d), t.search});
    return out;
  }
  const RowTuning& d = default_row_tuning();
  for (const RowTunable& t : row_tunables())
    if (!t.search.empty()) out.push_back({t.directive, t.get(d), t.search});
  return out;
}

// The directives of `chosen` that differ from kiln's schedule, one a line.
std::string schedule_text(const std::vector<Knob>& all, const std::map<std::string, int64_t>& chosen) {
  std::string out;
  for (const Knob& k : all) {
    auto it = chosen.find(k.directive);
    if (it != chosen.end() && it->second != k.fallback) out += k.directive + " " + std::to_string(it->second) + "\n";
  }
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
  s.cuda = r.device.is_cuda();
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
  compile_region_object(s.pipeline, pipeline_arguments(s.region, s.lowered), name, object, s.cuda);
  link_shared_library({object}, library);
  b.library = std::make_shared<SharedLibrary>(library);  // stays mapped once its file is gone
  b.function = b.library->function(name);
  std::filesystem::remove(object);
  std::filesystem::remove(library);
  return b;
}

// One run of a built region into `outputs`.
void run_once(const RecordedRegion& r, const Built& b, const std::vector<Tensor>& outputs) {
  std::vector<Tensor> buffers = r.inputs;
  buffers.insert(buffers.end(), outputs.begin(), outputs.end());
  run_region_function(b.function, *b.library, r.region, buffers, r.sizes);
}

// Runs a built region on the recorded inputs into `outputs`; times it: the median of repeats
// after a warm-up, repeated until about 0.15 s have passed (5 to 51 samples). On CUDA a sample is
// 10 runs issued back to back and waited for, divided by 10.
double time_ms(const RecordedRegion& r, const Built& b, const std::vector<Tensor>& outputs) {
  bool cuda = r.device.is_cuda();
  int batch = cuda ? 10 : 1;
  auto run = [&] { run_once(r, b, outputs); };
  auto wait = [&] {
    if (cuda) cuda_synchronize(r.device.index);
  };
  run();
  wait();
  std::vector<double> ms;
  auto start = std::chrono::steady_clock::now();
  while (ms.size() < 5 || (ms.size() < 51 && seconds_since(start) < 0.15)) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) run();
    wait();
    ms.push_back(seconds_since(t0) * 1e3 / batch);
  }
  std::nth_element(ms.begin(), ms.begin() + long(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

// The byte the guard zones around a CPU region's outputs hold.
constexpr unsigned char kGuardByte = 0xa5;

// Outputs for the region's runs. On the CPU each lies between two guard zones as large as itself
// (at least 4 KiB) in one allocation, so a candidate that writes past its outputs is caught
// (outputs_intact) before it corrupts anything else of the process: Halide 14 drops the guard of
// some splits (see cpu_schedule.cpp), and a candidate schedule may meet such a case.
std::vector<Tensor> fresh_outputs(const RecordedRegion& r) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < r.output_shapes.size(); ++k) {
    if (r.device.is_cuda()) {
      out.push_back(Tensor::empty(r.output_shapes[k], {r.output_dtypes[k], r.device}));
      continue;
    }
    size_t item = itemsize(r.output_dtypes[k]);
    size_t bytes = size_t(numel(r.output_shapes[k])) * item;
    size_t guard = (std::max<size_t>(bytes, 4096) + item - 1) / item * item;
    std::shared_ptr<Storage> storage = Storage::allocate(bytes + 2 * guard, r.device);
    std::memset(storage->data, kGuardByte, storage->nbytes);
    out.push_back(Tensor::make_view(std::move(storage), r.output_shapes[k], contiguous_strides(r.output_shapes[k]),
                                    int64_t(guard / item), r.output_dtypes[k]));
  }
  return out;
}

// Whether the guard zones around the outputs still hold their byte.
bool outputs_intact(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) {
    if (!t.device().is_cpu()) continue;
    const Storage& s = *t.storage();
    size_t begin = size_t(t.storage_offset()) * itemsize(t.dtype());
    size_t end = begin + size_t(t.numel()) * itemsize(t.dtype());
    const unsigned char* p = static_cast<const unsigned char*>(s.data);
    for (size_t i = 0; i < s.nbytes; ++i)
      if ((i < begin || i >= end) && p[i] != kGuardByte) return false;
  }
  return true;
}

// Whether a candidate's outputs match the default's: floating point within a relative tolerance
// for its width (a different summation order rounds differently), integers exactly.
bool same_results(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  for (size_t k = 0; k < got.size(); ++k) {
    Tensor a = got[k].to(Device::cpu()).to(DType::f64).contiguous();
    Tensor b = want[k].to(Device::cpu()).to(DType::f64).contiguous();
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
    if (buffers.empty()) return;
    std::string signature = region_signature(*g, s.region);
    std::string key = region_schedule_key(signature);
    for (RecordedRegion& r : regions_)
      if (r.key == key) {
        ++r.calls;
        return;
      }
    RecordedRegion& r = regions_.emplace_back();
    r.graph = g;
    r.region = s.region;
    r.key = key;
    r.signature = signature;
    r.what = step_what(*g, s);
    r.calls = 1;
    r.sizes = sizes;
    r.device = buffers.back().device();
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

std::string check_region_schedule(const RecordedRegion& r, const std::string& schedule) {
  std::vector<Tensor> want = fresh_outputs(r), got = fresh_outputs(r);
  run_once(r, build(r, ""), want);
  run_once(r, build(r, schedule), got);
  if (!outputs_intact(want)) return "kiln's own schedule writes outside its outputs";
  if (!outputs_intact(got)) return "writes outside its outputs";
  if (!same_results(got, want)) return "outputs differ from kiln's schedule's";
  return "";
}

TuneResult tune_region(const RecordedRegion& r, const TuneOptions& options,
                       const std::function<void(const std::string&)>& progress) {
  auto start = std::chrono::steady_clock::now();
  TuneResult out;
  out.key = r.key;
  out.what = r.what;
  out.calls = r.calls;
  std::vector<Tensor> want = fresh_outputs(r), got = fresh_outputs(r);
  Built plain = build(r, "");
  run_once(r, plain, want);
  KILN_CHECK(outputs_intact(want), "kiln tune: region ", r.key, " (", r.what, ") writes outside its outputs with "
             "kiln's own schedule");
  // Three medians of the default: the middle one is its time, its distance from the lowest the
  // noise (one disturbed measurement, common on a shared 2-core machine, does not set either).
  std::vector<double> medians;
  for (int i = 0; i < 3; ++i) medians.push_back(time_ms(r, plain, want));
  std::sort(medians.begin(), medians.end());
  out.default_ms = medians[1];
  out.noise = (medians[1] - medians[0]) / std::max(medians[0], 1e-9);
  double threshold = std::max(options.min_gain, out.noise);
  std::map<std::string, double> timed{{plain.source, out.default_ms}};  // by schedule source
  std::vector<Knob> all = knobs(r.device.is_cuda());
  std::map<std::string, int64_t> best;
  for (const Knob& k : all) best[k.directive] = k.fallback;
  double best_ms = out.default_ms;
  bool improved = true;
  while (improved && seconds_since(start) < options.budget_s) {
    improved = false;
    for (const Knob& k : all) {
      for (int64_t v : k.values) {
        if (v == best[k.directive] || seconds_since(start) >= options.budget_s) continue;
        std::map<std::string, int64_t> c = best;
        c[k.directive] = v;
        std::string text = schedule_text(all, c), what = k.directive + " " + std::to_string(v);
        Built built;
        try {
          built = build(r, text);
        } catch (const std::exception& e) {  // a value this region's schedule cannot take
          if (progress) progress("  " + what + ": does not build (" + e.what() + ")");
          continue;
        }
        if (timed.count(built.source)) continue;  // the same code as a schedule already timed
        run_once(r, built, got);
        if (!outputs_intact(got)) {  // caught before it is run again; the guards are filled anew
          ++out.trials;
          ++out.rejected;
          timed[built.source] = 0;
          if (progress) progress("  " + what + ": writes outside its outputs; rejected");
          got = fresh_outputs(r);
          continue;
        }
        if (!same_results(got, want)) {  // checked before it costs a timing
          ++out.trials;
          ++out.rejected;
          timed[built.source] = 0;
          if (progress) progress("  " + what + ": outputs differ from the default's; rejected");
          continue;
        }
        double ms = time_ms(r, built, got);
        timed[built.source] = ms;
        ++out.trials;
        if (ms < best_ms * (1 - threshold)) {
          best = c;
          best_ms = ms;
          improved = true;
        }
        out.history.push_back({out.trials, ms, best_ms});
        if (progress) {
          char line[200];
          std::snprintf(line, sizeof line, "  trial %d: %s: %.4f ms (best %.4f ms, %.2fx)", out.trials, what.c_str(), ms,
                        best_ms, out.default_ms / best_ms);
          progress(line);
        }
      }
    }
  }
  out.schedule = schedule_text(all, best);
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
