#include "dsl/cuda/cupti_activity.h"

#include "dsl/error.h"

#ifndef KILN_HAVE_CUPTI_HEADERS

namespace kiln {

std::string cupti_unavailable_reason() {
  return "kiln was built without CUPTI's header (cupti.h, from the CUDA toolkit)";
}
struct CuptiActivity::Impl {};
CuptiActivity::CuptiActivity(std::chrono::steady_clock::time_point) {
  KILN_CHECK(false, "CUDA activity: ", cupti_unavailable_reason());
}
CuptiActivity::~CuptiActivity() = default;
std::vector<DeviceRecord> CuptiActivity::stop() { return {}; }
bool cupti_push_launch_scope(uint64_t) { return false; }
void cupti_pop_launch_scope() {}

}  // namespace kiln

#else

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dsl/cuda/cuda_api.h"
#include "dsl/cuda/cuda_library.h"

namespace kiln {

namespace {

struct Api {
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiGetVersion) version = nullptr;
  // Optional (CUPTI 12.5 and later): device times on the host's steady clock.
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
};

const CudaLibrary<Api>& loaded() {
  static const CudaLibrary<Api> l = load_cuda_library<Api>(
      {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13"},
      "CUPTI (libcupti.so.13, in the CUDA toolkit's lib64)", "libcupti",
      [](void* lib, Api& a, std::string& missing) {
        resolve(lib, "cuptiActivityEnable", a.enable, missing);
        resolve(lib, "cuptiActivityDisable", a.disable, missing);
        resolve(lib, "cuptiActivityRegisterCallbacks", a.register_callbacks, missing);
        resolve(lib, "cuptiActivityFlushAll", a.flush_all, missing);
        resolve(lib, "cuptiActivityGetNextRecord", a.next_record, missing);
        resolve(lib, "cuptiActivityGetNumDroppedRecords", a.dropped_records, missing);
        resolve(lib, "cuptiGetTimestamp", a.timestamp, missing);
        resolve(lib, "cuptiGetResultString", a.result_string, missing);
        resolve(lib, "cuptiActivityPushExternalCorrelationId", a.push_external, missing);
        resolve(lib, "cuptiActivityPopExternalCorrelationId", a.pop_external, missing);
        resolve(lib, "cuptiGetVersion", a.version, missing);
        a.register_timestamp =
            reinterpret_cast<decltype(a.register_timestamp)>(dlsym(lib, "cuptiActivityRegisterTimestampCallback"));
      },
      // The record layouts (CUpti_ActivityKernel10, ...) are the header's; another major version
      // of the library lays them out differently.
      [](void*, const Api& a) {
        uint32_t version = 0;
        if (a.version(&version) == CUPTI_SUCCESS && version / 10000 == CUPTI_API_VERSION / 10000) return std::string();
        return "libcupti's API version " + std::to_string(version) + " is not the " +
               std::to_string(CUPTI_API_VERSION / 10000) + ".x kiln was built with (CUPTI_API_VERSION " +
               std::to_string(CUPTI_API_VERSION) + ")";
      });
  return l;
}

const Api& api() { return loaded().api; }

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* what = nullptr;
  if (api().result_string(r, &what) != CUPTI_SUCCESS || !what) what = "unknown error";
  KILN_CHECK(false, "CUDA activity: ", call, " failed: ", what);
}

// The driver's and the runtime's API records are not kept: CUPTI writes an external correlation
// record where an API record is made inside a pushed scope, so they are what links a kernel
// (launched by Halide's runtime through the driver, or by cuBLAS and cuDNN through the runtime) to
// its scope, as in PyTorch's profiler (Kineto).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,          CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr size_t kBufferBytes = 8 << 20;

// A record as it arrives, before its external id is joined and its time converted.
struct Raw {
  DeviceRecord record;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation = 0;
};

// What CUPTI's buffers delivered; written on CUPTI's thread. Never destroyed: that thread may
// outlive static destructors.
struct Collected {
  std::mutex mu;
  std::vector<Raw> records;
  std::unordered_map<uint32_t, uint64_t> external;  // CUPTI correlation id -> launch scope id
  size_t dropped = 0;  // records CUPTI could not buffer
  size_t untimed = 0;  // records without timestamps (CUPTI short of device memory, or unfinished)
};

Collected& collected() {
  static Collected* c = new Collected;
  return *c;
}

std::atomic<bool> recording{false};

std::string demangled(const char* name) {
  if (!name) return "<unnamed kernel>";
  std::string out = name;
  if (out.rfind("_Z", 0) == 0) {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (d && status == 0) out = d;
    std::free(d);
  }
  return out;
}

const char* copy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    default: return "memcpy";
  }
}

// The fields every kernel, memcpy and memset record has: where it ran, when, and the id of the API
// call that launched it.
template <typename Record>
void place_and_time(Raw& raw, const Record& m) {
  raw.record.device = int(m.deviceId);
  raw.record.stream = m.streamId;
  raw.start_ns = m.start;
  raw.end_ns = m.end;
  raw.correlation = m.correlationId;
}

// Called with collected().mu held.
void add(Collected& c, const CUpti_Activity* record) {
  Raw raw;
  DeviceRecord& r = raw.record;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      r.kind = "kernel";
      r.name = demangled(k->name);
      r.args = "\"grid\": [" + std::to_string(k->gridX) + ", " + std::to_string(k->gridY) + ", " +
               std::to_string(k->gridZ) + "], \"block\": [" + std::to_string(k->blockX) + ", " +
               std::to_string(k->blockY) + ", " + std::to_string(k->blockZ) +
               "], \"registers\": " + std::to_string(k->registersPerThread) +
               ", \"shared_bytes\": " + std::to_string(k->staticSharedMemory + k->dynamicSharedMemory);
      place_and_time(raw, *k);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      r.kind = "memcpy";
      r.name = copy_name(m->copyKind);
      r.args = "\"bytes\": " + std::to_string(m->bytes);
      place_and_time(raw, *m);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      r.kind = "memset";
      r.name = "memset";
      r.args = "\"bytes\": " + std::to_string(m->bytes);
      place_and_time(raw, *m);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) c.external[e->correlationId] = e->externalId;
      return;
    }
    default: return;
  }
  if (raw.start_ns == 0 || raw.end_ns < raw.start_ns) {
    ++c.untimed;
    return;
  }
  c.records.push_back(std::move(raw));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Collected& c = collected();
  size_t dropped = 0;
  if (api().dropped_records(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    CUpti_Activity* record = nullptr;
    while (api().next_record(buffer, valid, &record) == CUPTI_SUCCESS) add(c, record);
    c.dropped += dropped;
  }
  std::free(buffer);
}

uint64_t steady_ns() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

uint64_t CUPTIAPI steady_timestamp() { return steady_ns(); }

// Whether CUPTI reports times on the host's steady clock (its default on Linux is
// CLOCK_REALTIME, which an NTP adjustment moves during a long profile).
bool steady_timestamps = false;

}  // namespace

std::string cupti_unavailable_reason() { return loaded().reason; }

struct CuptiActivity::Impl {
  uint64_t start_ns = 0;
  double start_us = 0;  // the same moment on the host's steady clock, from the origin
  bool stopped = false;
};

CuptiActivity::CuptiActivity(std::chrono::steady_clock::time_point origin) : impl_(std::make_unique<Impl>()) {
  KILN_CHECK(loaded().reason.empty(), "CUDA activity: ", loaded().reason);
  KILN_CHECK(!recording.exchange(true), "CUDA activity: another recording is running (one at a time)");
  try {
    static std::once_flag registered;
    std::call_once(registered, [] {
      // Before any kind is enabled, as CUPTI asks.
      if (api().register_timestamp)
        steady_timestamps = api().register_timestamp(steady_timestamp) == CUPTI_SUCCESS;
      check(api().register_callbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    });
    {
      std::lock_guard<std::mutex> lock(collected().mu);
      collected().records.clear();
      collected().external.clear();
      collected().dropped = 0;
      collected().untimed = 0;
    }
    for (CUpti_ActivityKind k : kKinds) check(api().enable(k), "cuptiActivityEnable");
    if (steady_timestamps) impl_->start_ns = steady_ns();
    else check(api().timestamp(&impl_->start_ns), "cuptiGetTimestamp");
    impl_->start_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin).count();
  } catch (...) {
    for (CUpti_ActivityKind k : kKinds) api().disable(k);
    recording = false;
    throw;
  }
}

CuptiActivity::~CuptiActivity() {
  if (impl_ && !impl_->stopped) {
    try {
      stop();
    } catch (const std::exception&) {
      // A destructor reports nothing; stop() called explicitly gives the error.
    }
  }
}

std::vector<DeviceRecord> CuptiActivity::stop() {
  if (impl_->stopped) return {};
  impl_->stopped = true;
  recording = false;
  for (CUpti_ActivityKind k : kKinds) api().disable(k);  // then nothing new is written
  check(api().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Collected& c = collected();
  std::vector<DeviceRecord> out;
  std::lock_guard<std::mutex> lock(c.mu);
  for (Raw& raw : c.records) {
    if (raw.start_ns < impl_->start_ns) continue;  // ran before this recording started
    DeviceRecord r = std::move(raw.record);
    r.start_us = impl_->start_us + double(raw.start_ns - impl_->start_ns) * 1e-3;
    r.duration_us = double(raw.end_ns - raw.start_ns) * 1e-3;
    if (auto it = c.external.find(raw.correlation); it != c.external.end()) r.launched_by = it->second;
    out.push_back(std::move(r));
  }
  if (c.dropped) std::fprintf(stderr, "kiln: CUDA activity: CUPTI dropped %zu records (its buffers filled up)\n", c.dropped);
  if (c.untimed)
    std::fprintf(stderr,
                 "kiln: CUDA activity: %zu records had no timestamps (unfinished at stop: synchronize first; or CUPTI "
                 "was short of device memory)\n",
                 c.untimed);
  c.records.clear();
  c.external.clear();
  std::stable_sort(out.begin(), out.end(),
                   [](const DeviceRecord& a, const DeviceRecord& b) { return a.start_us < b.start_us; });
  return out;
}

bool cupti_push_launch_scope(uint64_t id) {
  if (!recording.load(std::memory_order_relaxed)) return false;
  return api().push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id) == CUPTI_SUCCESS;
}

void cupti_pop_launch_scope() {
  uint64_t last = 0;
  api().pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

}  // namespace kiln

#endif
