// kiln_kernel_summary: a CUPTI injection library that shows where a CUDA program's device time goes,
// per kernel, with no change to the program (kiln's benchmarks, PyTorch, anything on the driver).
//
//   CUDA_INJECTION64_PATH=$PWD/build/lib/libkiln_kernel_summary.so KILN_KERNEL_SUMMARY=out.txt program args
//
// KILN_KERNEL_SUMMARY          the text summary's file (default: stderr); a %p in it becomes the pid,
//                              for programs that start other CUDA processes.
// KILN_KERNEL_SUMMARY_JSON     also write the summary as JSON to this file (%p as above).
// KILN_KERNEL_SUMMARY_WINDOW   `profiler`: count only activity that starts between a
//                              cuProfilerStart (or cudaProfilerStart) and the next stop; windows
//                              add up. Unset: the whole run.
// KILN_KERNEL_SUMMARY_CALLS_PER  N steps the window covers: adds per-step ms and calls.
//
// It reports, at exit: one line per kernel (name, grid and block) sorted by device time (total,
// share, calls, mean, min, registers, shared memory), the memcpy time and bytes by direction, the
// memset time, the busy span (first start to last end in each window, per device) and its idle
// time (span minus the union of kernel, memcpy and memset intervals), and dropped records.
// Errors in CUPTI print one line and turn the summary off; the program runs on.
#include <cupti.h>

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unistd.h>

namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr uint64_t kOpen = UINT64_MAX;
constexpr size_t kNameChars = 160;

enum class Copy : uint8_t { HtoD, DtoH, DtoD, Other, Memset };
constexpr const char* kCopyNames[] = {"HtoD", "DtoH", "DtoD", "other"};

struct KernelKey {
  std::string name;
  int32_t grid[3];
  int32_t block[3];
  bool operator==(const KernelKey& o) const {
    return name == o.name && std::equal(grid, grid + 3, o.grid) && std::equal(block, block + 3, o.block);
  }
};

struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const {
    size_t h = std::hash<std::string>()(k.name);
    for (int i = 0; i < 3; ++i) h = h * 31 + uint32_t(k.grid[i]) * 7 + uint32_t(k.block[i]);
    return h;
  }
};

struct KernelGroup {
  KernelKey key;
  uint32_t registers = 0;
  uint32_t shared_bytes = 0;  // static + dynamic, the largest seen
};

struct Activity {
  uint64_t start, end;
  uint64_t bytes;
  uint32_t device;
  uint32_t group;  // kernels: index into groups
  bool kernel;
  Copy copy;
};

using Windows = std::vector<std::pair<uint64_t, uint64_t>>;
constexpr size_t kNoWindow = SIZE_MAX;

// The window, sorted by start, that holds time t.
size_t window_of(const Windows& windows, uint64_t t) {
  auto after = std::upper_bound(windows.begin(), windows.end(), std::make_pair(t, kOpen));
  if (after == windows.begin() || t >= std::prev(after)->second) return kNoWindow;
  return size_t(after - windows.begin()) - 1;
}

struct Settings {
  std::string text_path, json_path;
  bool profiler_window = false;
  uint64_t calls_per = 0;
};

struct State {
  std::mutex mutex;
  std::atomic<bool> disabled{false};
  Settings settings;
  std::vector<Activity> activities;
  std::vector<KernelGroup> groups;
  std::unordered_map<KernelKey, uint32_t, KernelKeyHash> group_of;
  Windows windows;  // [start, stop), in time order; the last may be open
  size_t dropped = 0;
  size_t untimed = 0;
};

// Never destroyed: CUPTI's thread and the atexit handler may outlive static destructors.
State& state() {
  static State* s = new State;
  return *s;
}

// The first failure prints one line and turns the summary off.
bool ok(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return true;
  if (state().disabled.exchange(true)) return false;
  const char* what = nullptr;
  if (cuptiGetResultString(r, &what) != CUPTI_SUCCESS || !what) what = "unknown error";
  std::fprintf(stderr, "kiln_kernel_summary: %s failed: %s\n", call, what);
  return false;
}

std::string with_pid(std::string path) {
  for (size_t at; (at = path.find("%p")) != std::string::npos;) path.replace(at, 2, std::to_string(getpid()));
  return path;
}

Settings read_settings() {
  Settings s;
  if (const char* v = std::getenv("KILN_KERNEL_SUMMARY")) s.text_path = with_pid(v);
  if (const char* v = std::getenv("KILN_KERNEL_SUMMARY_JSON")) s.json_path = with_pid(v);
  if (const char* v = std::getenv("KILN_KERNEL_SUMMARY_WINDOW"); v && *v) {
    s.profiler_window = std::strcmp(v, "profiler") == 0;
    if (!s.profiler_window)
      std::fprintf(stderr,
                   "kiln_kernel_summary: KILN_KERNEL_SUMMARY_WINDOW=%s is not 'profiler'; counting the whole run\n", v);
  }
  if (const char* v = std::getenv("KILN_KERNEL_SUMMARY_CALLS_PER"); v && *v) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (*end == '\0' && n > 0) s.calls_per = n;
    else
      std::fprintf(stderr, "kiln_kernel_summary: KILN_KERNEL_SUMMARY_CALLS_PER=%s is not a positive integer; ignored\n",
                   v);
  }
  return s;
}

Copy copy_of(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return Copy::HtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return Copy::DtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return Copy::DtoD;
    default: return Copy::Other;
  }
}

// Called with the mutex held.
void add_record(State& s, const CUpti_Activity* record) {
  Activity a{};
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelKey key{k->name ? k->name : "<unnamed>", {k->gridX, k->gridY, k->gridZ}, {k->blockX, k->blockY, k->blockZ}};
      auto [it, added] = s.group_of.try_emplace(std::move(key), uint32_t(s.groups.size()));
      if (added) s.groups.push_back({it->first});
      KernelGroup& g = s.groups[it->second];
      g.registers = std::max<uint32_t>(g.registers, k->registersPerThread);
      g.shared_bytes = std::max<uint32_t>(g.shared_bytes, uint32_t(k->staticSharedMemory + k->dynamicSharedMemory));
      a = {k->start, k->end, 0, k->deviceId, it->second, true, Copy::Other};
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      a = {m->start, m->end, m->bytes, m->deviceId, 0, false, copy_of(m->copyKind)};
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      a = {m->start, m->end, m->bytes, m->deviceId, 0, false, Copy::Memset};
      break;
    }
    default: return;
  }
  // A record arrives after its activity ended, so a window that opens later cannot hold it.
  if (a.start == 0 || a.end < a.start) ++s.untimed;
  else if (!s.settings.profiler_window || window_of(s.windows, a.start) != kNoWindow) s.activities.push_back(a);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  *buffer = state().disabled ? nullptr : static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) add_record(s, record);
    size_t dropped = 0;
    if (ok(cuptiActivityGetNumDroppedRecords(context, stream, &dropped), "cuptiActivityGetNumDroppedRecords"))
      s.dropped += dropped;
  }
  std::free(buffer);
}

// cudaProfilerStart/Stop reach the driver's cuProfilerStart/Stop, whose callbacks then fire inside
// the runtime's: a driver callback inside a runtime one is the same call.
thread_local bool in_runtime_profiler_call = false;

void CUPTIAPI on_profiler_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool enter = call->callbackSite == CUPTI_API_ENTER;
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && in_runtime_profiler_call) return;
  if (runtime) in_runtime_profiler_call = enter;
  const bool start =
      runtime ? id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000 : id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
  // A window opens when start is entered and closes when stop returns.
  if (start != enter || state().disabled) return;
  uint64_t now = 0;
  if (!ok(cuptiGetTimestamp(&now), "cuptiGetTimestamp")) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const bool open = !s.windows.empty() && s.windows.back().second == kOpen;
  if (start && !open) s.windows.push_back({now, kOpen});
  if (!start && open) s.windows.back().second = now;
}

std::string display_name(const std::string& name) {
  std::string out = name;
  if (name.rfind("_Z", 0) == 0) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
    if (demangled && status == 0) out = demangled;
    std::free(demangled);
  }
  if (out.size() > kNameChars) out = out.substr(0, kNameChars - 3) + "...";
  return out;
}

std::string dims(const int32_t d[3]) {
  return std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += {'\\', c};
    else if (uint8_t(c) < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

struct KernelTotals {
  uint32_t group;
  uint64_t calls = 0, total_ns = 0, min_ns = UINT64_MAX;
};

struct CopyTotals {
  uint64_t calls = 0, bytes = 0, ns = 0;
};

struct Summary {
  size_t windows = 0;
  uint64_t kernel_ns = 0, span_ns = 0, busy_ns = 0, kernel_calls = 0;
  std::vector<KernelTotals> kernels;  // by total time, descending
  CopyTotals copies[5];               // indexed by Copy
  size_t devices = 0;
};

double ms(uint64_t ns) { return ns * 1e-6; }
double us(uint64_t ns) { return ns * 1e-3; }

// Groups each counted activity by (device, window), then adds up spans and interval unions.
Summary summarize(const State& s) {
  Summary out;
  const Windows windows = s.settings.profiler_window ? s.windows : Windows{{0, kOpen}};
  out.windows = windows.size();
  std::vector<KernelTotals> kernels(s.groups.size());
  for (uint32_t g = 0; g < kernels.size(); ++g) kernels[g].group = g;
  std::map<std::pair<uint32_t, size_t>, std::vector<std::pair<uint64_t, uint64_t>>> intervals;
  for (const Activity& a : s.activities) {
    const size_t window = window_of(windows, a.start);
    if (window == kNoWindow) continue;
    intervals[{a.device, window}].push_back({a.start, a.end});
    const uint64_t ns = a.end - a.start;
    if (a.kernel) {
      KernelTotals& k = kernels[a.group];
      ++k.calls;
      k.total_ns += ns;
      k.min_ns = std::min(k.min_ns, ns);
      out.kernel_ns += ns;
      ++out.kernel_calls;
    } else {
      CopyTotals& c = out.copies[size_t(a.copy)];
      ++c.calls;
      c.bytes += a.bytes;
      c.ns += ns;
    }
  }
  std::vector<uint32_t> devices;
  for (auto& [where, list] : intervals) {
    devices.push_back(where.first);
    std::sort(list.begin(), list.end());
    uint64_t first = list.front().first, last = 0, run_start = first, run_end = first;
    for (auto [start, end] : list) {
      last = std::max(last, end);
      if (start > run_end) {
        out.busy_ns += run_end - run_start;
        run_start = start;
      }
      run_end = std::max(run_end, end);
    }
    out.busy_ns += run_end - run_start;
    out.span_ns += last - first;
  }
  std::sort(devices.begin(), devices.end());
  out.devices = std::unique(devices.begin(), devices.end()) - devices.begin();
  std::erase_if(kernels, [](const KernelTotals& k) { return k.calls == 0; });
  std::sort(kernels.begin(), kernels.end(),
            [](const KernelTotals& a, const KernelTotals& b) { return a.total_ns > b.total_ns; });
  out.kernels = std::move(kernels);
  return out;
}

void write_text(FILE* f, const State& s, const Summary& sum) {
  const uint64_t n = s.settings.calls_per;
  std::fprintf(f, "kiln_kernel_summary: pid %d, ", int(getpid()));
  if (s.settings.profiler_window) std::fprintf(f, "%zu windows (cuProfilerStart to cuProfilerStop)", sum.windows);
  else std::fprintf(f, "the whole run");
  std::fprintf(f, ", %zu device(s)\n", sum.devices);
  std::fprintf(f, "kernels %10.3f ms  %" PRIu64 " calls, %zu distinct\n", ms(sum.kernel_ns), sum.kernel_calls,
               sum.kernels.size());
  uint64_t copy_ns = 0;
  for (int c = 0; c < 4; ++c) copy_ns += sum.copies[c].ns;
  std::fprintf(f, "memcpy  %10.3f ms ", ms(copy_ns));
  for (int c = 0; c < 4; ++c) {
    const CopyTotals& t = sum.copies[c];
    if (t.calls)
      std::fprintf(f, "  %s %" PRIu64 " calls %.3f MB %.3f ms", kCopyNames[c], t.calls, t.bytes * 1e-6, ms(t.ns));
  }
  const CopyTotals& set = sum.copies[size_t(Copy::Memset)];
  std::fprintf(f, "\nmemset  %10.3f ms  %" PRIu64 " calls %.3f MB\n", ms(set.ns), set.calls, set.bytes * 1e-6);
  const uint64_t idle = sum.span_ns - sum.busy_ns;
  std::fprintf(f, "span    %10.3f ms  busy %.3f ms, idle %.3f ms (%.1f%%)\n", ms(sum.span_ns), ms(sum.busy_ns),
               ms(idle), sum.span_ns ? 100.0 * idle / sum.span_ns : 0.0);
  if (n)
    std::fprintf(f, "per step (%" PRIu64 " steps): kernels %.3f ms, span %.3f ms, idle %.3f ms\n", n,
                 ms(sum.kernel_ns) / n, ms(sum.span_ns) / n, ms(idle) / n);
  std::fprintf(f, "records: %zu dropped, %zu without timestamps\n\n", s.dropped, s.untimed);
  std::fprintf(f,
               "  total_ms  share    calls%s   mean_us    min_us  grid            block          regs  shared  name\n",
               n ? "   ms/step  calls/step" : "");
  for (const KernelTotals& k : sum.kernels) {
    const KernelGroup& g = s.groups[k.group];
    std::fprintf(f, "%10.3f %5.1f%% %8" PRIu64, ms(k.total_ns),
                 sum.kernel_ns ? 100.0 * k.total_ns / sum.kernel_ns : 0.0, k.calls);
    if (n) std::fprintf(f, " %9.3f %11.1f", ms(k.total_ns) / n, double(k.calls) / n);
    std::fprintf(f, " %9.2f %9.2f  %-15s %-13s %5u %7u  %s\n", us(k.total_ns) / k.calls, us(k.min_ns),
                 dims(g.key.grid).c_str(), dims(g.key.block).c_str(), g.registers, g.shared_bytes,
                 display_name(g.key.name).c_str());
  }
}

void write_json(FILE* f, const State& s, const Summary& sum) {
  const uint64_t n = s.settings.calls_per;
  std::fprintf(f, "{\"window\": \"%s\", \"windows\": %zu, \"kernel_ms\": %.6f, \"idle_ms\": %.6f, \"span_ms\": %.6f",
               s.settings.profiler_window ? "profiler" : "all", sum.windows, ms(sum.kernel_ns),
               ms(sum.span_ns - sum.busy_ns), ms(sum.span_ns));
  if (n) std::fprintf(f, ", \"calls_per\": %" PRIu64, n);
  std::fprintf(f, ", \"dropped_records\": %zu,\n \"memcpy\": [", s.dropped);
  for (int c = 0; c < 4; ++c) {
    const CopyTotals& t = sum.copies[c];
    std::fprintf(f, "%s{\"kind\": \"%s\", \"calls\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"ms\": %.6f}", c ? ", " : "",
                 kCopyNames[c], t.calls, t.bytes, ms(t.ns));
  }
  const CopyTotals& set = sum.copies[size_t(Copy::Memset)];
  std::fprintf(f, "],\n \"memset\": {\"calls\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"ms\": %.6f},\n \"kernels\": [",
               set.calls, set.bytes, ms(set.ns));
  for (size_t i = 0; i < sum.kernels.size(); ++i) {
    const KernelTotals& k = sum.kernels[i];
    const KernelGroup& g = s.groups[k.group];
    std::fprintf(f,
                 "%s\n  {\"name\": %s, \"grid\": [%s], \"block\": [%s], \"calls\": %" PRIu64
                 ", \"total_ms\": %.6f, \"mean_us\": %.3f, \"min_us\": %.3f, \"registers\": %u, \"shared_bytes\": %u",
                 i ? "," : "", json_string(display_name(g.key.name)).c_str(), dims(g.key.grid).c_str(),
                 dims(g.key.block).c_str(), k.calls, ms(k.total_ns), us(k.total_ns) / k.calls, us(k.min_ns),
                 g.registers, g.shared_bytes);
    if (n)
      std::fprintf(f, ", \"total_ms_per_step\": %.6f, \"calls_per_step\": %.3f", ms(k.total_ns) / n,
                   double(k.calls) / n);
    std::fprintf(f, "}");
  }
  std::fprintf(f, "]}\n");
}

FILE* open_output(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) std::fprintf(stderr, "kiln_kernel_summary: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
  return f;
}

void report_at_exit() {
  State& s = state();
  if (s.disabled) return;
  if (!ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll")) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  const Summary sum = summarize(s);
  FILE* text = s.settings.text_path.empty() ? nullptr : open_output(s.settings.text_path);
  write_text(text ? text : stderr, s, sum);
  if (text) std::fclose(text);
  if (!s.settings.json_path.empty())
    if (FILE* json = open_output(s.settings.json_path)) {
      write_json(json, s, sum);
      std::fclose(json);
    }
}

bool subscribe_to_profiler_calls() {
  CUpti_SubscriberHandle subscriber{};
  return ok(cuptiSubscribe(&subscriber, on_profiler_api, nullptr), "cuptiSubscribe") &&
         ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart),
            "cuptiEnableCallback(cuProfilerStart)") &&
         ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop),
            "cuptiEnableCallback(cuProfilerStop)") &&
         ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000),
            "cuptiEnableCallback(cudaProfilerStart)") &&
         ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000),
            "cuptiEnableCallback(cudaProfilerStop)");
}

}  // namespace

// The CUDA driver calls this once, from cuInit, when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> initialized{false};
  if (initialized.exchange(true)) return 1;
  State& s = state();
  s.settings = read_settings();
  const bool started =
      ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks") &&
      ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)") &&
      ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)") &&
      ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)") &&
      (!s.settings.profiler_window || subscribe_to_profiler_calls());
  if (!started) {
    // Stop what was enabled; the failure is already reported, so these results are not checked.
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
  } else if (std::atexit(report_at_exit) != 0) {
    std::fprintf(stderr, "kiln_kernel_summary: atexit failed\n");
    s.disabled = true;
  }
  // 1 on failure too: what the driver does with 0 is undocumented, and the program must run on.
  return 1;
}
