#include "dsl/cuda/cuda_context.h"

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "dsl/cuda/halide_device_memory.h"
#include "dsl/error.h"

namespace kiln {

namespace {

std::atomic<uint64_t> h2d{0}, d2h{0}, d2d{0}, waits{0}, uploads{0};

std::mutex contexts_mu;
std::vector<std::unique_ptr<CudaContext>>& contexts() {
  static auto* v = new std::vector<std::unique_ptr<CudaContext>>();  // never destroyed: used at exit
  return *v;
}

// Halide's CUDA runtime loads each kernel module with a cap of 64 registers a thread unless
// HL_CUDA_JIT_MAX_REGISTERS says otherwise (its own setting, read at every module load). At 64 a
// warp-per-row kernel holding two rows of 1024 in registers (GPT-2's masked softmax backward
// reads y and dy: 64 floats a lane) spills: 361 us against 274 at 128 on an H200, the training
// step 52.45 -> 51.39 ms (255: 51.23; inference within 0.1 ms either way). kiln sets 128 unless
// the variable is already set, before the first kernel is loaded.
void raise_halide_register_cap() { ::setenv("HL_CUDA_JIT_MAX_REGISTERS", "128", /*overwrite=*/0); }

void install_halide_handlers() {
  raise_halide_register_cap();
  halide_set_cuda_acquire_context(&kiln_cuda_acquire_context);
  halide_set_cuda_release_context(&kiln_cuda_release_context);
  halide_set_cuda_get_stream(&kiln_cuda_get_stream);
  // Its intermediates' device memory, kept safe for CUDA graphs (halide_device_memory.h).
  halide_set_custom_get_library_symbol(&kiln_halide_get_library_symbol);
  // Intermediates a kernel allocates on the device are kept for the next call.
  halide_reuse_device_allocations(nullptr, true);
}

// The driver's current context is per thread; kiln makes its context current once per thread.
thread_local CUcontext current_on_thread = nullptr;
void make_current(const CudaContext& c) {
  if (current_on_thread == c.context) return;
  check_cuda(cuda_api().cuCtxSetCurrent(c.context), "cuda: cuCtxSetCurrent");
  current_on_thread = c.context;
}

std::atomic<CudaContext*> device0{nullptr};  // the fast path of cuda_context(0)

std::unique_ptr<CudaContext> make_context(int index) {
  const CudaApi& api = cuda_api();
  int count = 0;
  check_cuda(api.cuDeviceGetCount(&count), "cuda: counting devices");
  KILN_CHECK(index >= 0 && index < count, "cuda: device index ", index, " is out of range: this machine has ",
             count, " CUDA device", count == 1 ? "" : "s");
  auto c = std::make_unique<CudaContext>();
  c->index = index;
  check_cuda(api.cuDeviceGet(&c->device, index), "cuda: cuDeviceGet");
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof(name) - 1, c->device);
  c->name = name;
  check_cuda(api.cuDevicePrimaryCtxRetain(&c->context, c->device), "cuda: retaining the primary context");
  make_current(*c);
  check_cuda(api.cuStreamCreate(&c->stream, 0x1 /* CU_STREAM_NON_BLOCKING */), "cuda: creating the stream");
  return c;
}

}  // namespace

// Halide code runs on device 0 (kiln uses one device per process for Halide kernels).
int kiln_cuda_acquire_context(void*, void** ctx, bool) {
  *ctx = cuda_context(0).context;
  return 0;
}
int kiln_cuda_release_context(void*) { return 0; }
int kiln_cuda_get_stream(void*, void*, void** stream) {
  *stream = cuda_context(0).stream;
  return 0;
}

cublasHandle_t CudaContext::cublas() {
  if (cublas_) return cublas_;
  const CudaApi& api = cuda_api_with_cublas();
  make_current(*this);
  check_cublas(api.cublasCreate(&cublas_), "cuda: creating the cuBLAS handle");
  check_cublas(api.cublasSetStream(cublas_, stream), "cuda: binding cuBLAS to kiln's stream");
  // cuBLAS's own workspace pool is small; its documentation asks for 32 MiB on Hopper (4 MiB
  // before), where the faster GEMM kernels and split-K need it. Set after the stream: binding a
  // stream resets the workspace. The block lives as long as the handle (the process).
  const size_t workspace = size_t(32) << 20;
  CUdeviceptr block = 0;
  check_cuda(api.cuMemAlloc(&block, workspace), "cuda: allocating cuBLAS's 32 MiB workspace");
  check_cublas(api.cublasSetWorkspace(cublas_, reinterpret_cast<void*>(block), workspace),
               "cuda: giving cuBLAS its workspace");
  workspace_ = reinterpret_cast<void*>(block);
  workspace_bytes_ = workspace;
  return cublas_;
}

cublasLtHandle_t CudaContext::cublaslt() {
  if (cublaslt_) return cublaslt_;
  const CudaApi& api = cuda_api_with_cublas();
  make_current(*this);
  check_cublas(api.cublasLtCreate(&cublaslt_), "cuda: creating the cuBLASLt handle");
  return cublaslt_;
}

CudaContext& cuda_context(int index) {
  if (index == 0) {
    if (CudaContext* c = device0.load(std::memory_order_acquire)) {
      make_current(*c);
      return *c;
    }
  }
  std::lock_guard<std::mutex> lock(contexts_mu);
  auto& v = contexts();
  if (index >= 0 && size_t(index) < v.size() && v[size_t(index)]) {
    make_current(*v[size_t(index)]);
    return *v[size_t(index)];
  }
  std::unique_ptr<CudaContext> c = make_context(index);
  if (v.size() <= size_t(index)) v.resize(size_t(index) + 1);
  v[size_t(index)] = std::move(c);
  make_current(*v[size_t(index)]);
  if (index == 0) device0.store(v[0].get(), std::memory_order_release);
  static std::once_flag once;
  std::call_once(once, install_halide_handlers);
  return *v[size_t(index)];
}

namespace {

void wait_for(CUstream s) {
  waits++;
  check_cuda(cuda_api().cuStreamSynchronize(s), "cuda: waiting for the stream");
}

}  // namespace

void cuda_synchronize(int index) { wait_for(cuda_context(index).stream); }

void cuda_synchronize_created() {
  std::vector<CUstream> streams;
  {
    std::lock_guard<std::mutex> lock(contexts_mu);
    for (const std::unique_ptr<CudaContext>& c : contexts())
      if (c) streams.push_back(c->stream);
  }
  for (CUstream s : streams) wait_for(s);
}

CudaCounters cuda_counters() { return {h2d.load(), d2h.load(), d2d.load(), waits.load(), uploads.load()}; }

namespace {

// The rings of cuda_upload_arguments for one device: pinned host slots, device slots, and the
// event recorded after each slot's last copy.
struct ArgumentRing {
  char* host = nullptr;
  CUdeviceptr device = 0;
  std::vector<CUevent> copied;
  size_t next = 0;
};

std::mutex arguments_mu;
std::vector<CapturedArguments*> capturing_arguments;  // per device: where uploads go during a capture

}  // namespace

CapturedArguments::~CapturedArguments() {
  for (CUdeviceptr d : device) cuda_api().cuMemFree(d);
}

void CapturedArguments::upload() {
  CudaContext& c = cuda_context(index);
  for (size_t i = 0; i < device.size(); ++i)
    check_cuda(cuda_api().cuMemcpyHtoDAsync(device[i], bytes[i].data(), bytes[i].size(), c.stream),
               "cuda: uploading a captured graph's launch arguments");
  wait_for(c.stream);
}

ArgumentCaptureScope::ArgumentCaptureScope(CapturedArguments& into) : index_(into.index) {
  std::lock_guard<std::mutex> lock(arguments_mu);
  if (capturing_arguments.size() <= size_t(index_)) capturing_arguments.resize(size_t(index_) + 1, nullptr);
  capturing_arguments[size_t(index_)] = &into;
}

ArgumentCaptureScope::~ArgumentCaptureScope() {
  std::lock_guard<std::mutex> lock(arguments_mu);
  capturing_arguments[size_t(index_)] = nullptr;
}

CUdeviceptr cuda_upload_arguments(const void* src, size_t nbytes, int index) {
  KILN_CHECK(nbytes <= kArgumentSlotBytes, "cuda: internal: ", nbytes, " bytes of launch arguments exceed a slot of ",
             kArgumentSlotBytes);
  static std::vector<std::unique_ptr<ArgumentRing>> rings;
  CudaContext& c = cuda_context(index);
  const CudaApi& api = cuda_api();
  std::lock_guard<std::mutex> lock(arguments_mu);
  if (size_t(index) < capturing_arguments.size() && capturing_arguments[size_t(index)]) {
    CapturedArguments& kept = *capturing_arguments[size_t(index)];
    CUdeviceptr device = 0;
    check_cuda(api.cuMemAlloc(&device, nbytes), "cuda: device memory for captured launch arguments");
    kept.device.push_back(device);
    const char* bytes = static_cast<const char*>(src);
    kept.bytes.emplace_back(bytes, bytes + nbytes);
    return device;
  }
  if (rings.size() <= size_t(index)) rings.resize(size_t(index) + 1);
  std::unique_ptr<ArgumentRing>& ring = rings[size_t(index)];
  if (!ring) {
    auto r = std::make_unique<ArgumentRing>();
    void* host = nullptr;
    check_cuda(api.cuMemAllocHost(&host, kArgumentSlots * kArgumentSlotBytes), "cuda: pinned memory for launch arguments");
    r->host = static_cast<char*>(host);
    check_cuda(api.cuMemAlloc(&r->device, kArgumentSlots * kArgumentSlotBytes), "cuda: device memory for launch arguments");
    r->copied.assign(kArgumentSlots, nullptr);
    for (CUevent& e : r->copied) check_cuda(api.cuEventCreate(&e, 0x2 /* CU_EVENT_DISABLE_TIMING */), "cuda: cuEventCreate");
    ring = std::move(r);
  }
  size_t slot = ring->next++ % kArgumentSlots;
  if (ring->next > kArgumentSlots)  // the slot's previous copy must have read the host bytes
    check_cuda(api.cuEventSynchronize(ring->copied[slot]), "cuda: waiting for a launch-argument slot");
  char* host = ring->host + slot * kArgumentSlotBytes;
  CUdeviceptr device = ring->device + slot * kArgumentSlotBytes;
  std::memcpy(host, src, nbytes);
  check_cuda(api.cuMemcpyHtoDAsync(device, host, nbytes, c.stream), "cuda: uploading launch arguments");
  check_cuda(api.cuEventRecord(ring->copied[slot], c.stream), "cuda: cuEventRecord");
  uploads++;
  return device;
}

void cuda_copy_to_device(CUdeviceptr dst, const void* src, size_t nbytes, int index) {
  CudaContext& c = cuda_context(index);
  h2d++;
  check_cuda(cuda_api().cuMemcpyHtoDAsync(dst, src, nbytes, c.stream), "cuda: copy host to device");
  // The source is pageable host memory that the caller may free at once: wait for the copy.
  waits++;
  check_cuda(cuda_api().cuStreamSynchronize(c.stream), "cuda: copy host to device");
}

void cuda_copy_to_host(void* dst, CUdeviceptr src, size_t nbytes, int index) {
  CudaContext& c = cuda_context(index);
  d2h++;
  check_cuda(cuda_api().cuMemcpyDtoHAsync(dst, src, nbytes, c.stream), "cuda: copy device to host");
  waits++;
  check_cuda(cuda_api().cuStreamSynchronize(c.stream), "cuda: copy device to host");
}

void cuda_copy_on_device(CUdeviceptr dst, CUdeviceptr src, size_t nbytes, int index) {
  CudaContext& c = cuda_context(index);
  d2d++;
  check_cuda(cuda_api().cuMemcpyDtoDAsync(dst, src, nbytes, c.stream), "cuda: copy on the device");
}

void cuda_fill(CUdeviceptr dst, const void* value, size_t element_size, size_t n, int index) {
  CudaContext& c = cuda_context(index);
  const CudaApi& api = cuda_api();
  uint32_t words[2] = {0, 0};
  std::memcpy(words, value, std::min<size_t>(element_size, 8));
  switch (element_size) {
    case 1: check_cuda(api.cuMemsetD8Async(dst, uint8_t(words[0]), n, c.stream), "cuda: fill"); return;
    case 2: check_cuda(api.cuMemsetD16Async(dst, uint16_t(words[0]), n, c.stream), "cuda: fill"); return;
    case 4: check_cuda(api.cuMemsetD32Async(dst, words[0], n, c.stream), "cuda: fill"); return;
    case 8:  // the low and the high words, each a column of a 2-D memset with an 8-byte pitch
      check_cuda(api.cuMemsetD2D32Async(dst, 8, words[0], 1, n, c.stream), "cuda: fill");
      check_cuda(api.cuMemsetD2D32Async(dst + 4, 8, words[1], 1, n, c.stream), "cuda: fill");
      return;
    default: throw_error("cuda: fill of ", element_size, "-byte elements");
  }
}

std::vector<double> time_candidates(int index, size_t count, const std::function<void(size_t)>& run) {
  CudaTimer timer(index);
  std::vector<double> medians;
  for (size_t i = 0; i < count; ++i) {
    run(i);
    std::vector<double> ms;
    for (int r = 0; r < 3; ++r) {
      timer.start();
      run(i);
      ms.push_back(timer.stop_ms());
    }
    std::sort(ms.begin(), ms.end());
    medians.push_back(ms[1]);
  }
  return medians;
}

CudaTimer::CudaTimer(int index) : index_(index) {
  cuda_context(index);
  check_cuda(cuda_api().cuEventCreate(&begin_, 0), "cuda: creating an event");
  check_cuda(cuda_api().cuEventCreate(&end_, 0), "cuda: creating an event");
}

CudaTimer::~CudaTimer() {
  if (begin_) cuda_api().cuEventDestroy(begin_);
  if (end_) cuda_api().cuEventDestroy(end_);
}

void CudaTimer::start() {
  check_cuda(cuda_api().cuEventRecord(begin_, cuda_context(index_).stream), "cuda: recording an event");
}

float CudaTimer::stop_ms() {
  check_cuda(cuda_api().cuEventRecord(end_, cuda_context(index_).stream), "cuda: recording an event");
  check_cuda(cuda_api().cuEventSynchronize(end_), "cuda: waiting for an event");
  float ms = 0;
  check_cuda(cuda_api().cuEventElapsedTime(&ms, begin_, end_), "cuda: reading an event");
  return ms;
}

CudaMarks::CudaMarks(int index) : index_(index) { cuda_context(index); }

CudaMarks::~CudaMarks() {
  for (CUevent e : events_) cuda_api().cuEventDestroy(e);
}

void CudaMarks::mark() {
  if (used_ == events_.size()) {
    CUevent e = nullptr;
    check_cuda(cuda_api().cuEventCreate(&e, 0), "cuda: creating an event");
    events_.push_back(e);
  }
  check_cuda(cuda_api().cuEventRecord(events_[used_++], cuda_context(index_).stream), "cuda: recording an event");
}

std::vector<double> CudaMarks::intervals_ms() {
  std::vector<double> out;
  if (used_ == 0) return out;
  check_cuda(cuda_api().cuEventSynchronize(events_[used_ - 1]), "cuda: waiting for an event");
  for (size_t i = 1; i < used_; ++i) {
    float ms = 0;
    check_cuda(cuda_api().cuEventElapsedTime(&ms, events_[i - 1], events_[i]), "cuda: reading an event");
    out.push_back(ms);
  }
  used_ = 0;
  return out;
}

}  // namespace kiln
