// The one CUDA context (the device's primary context) and the one stream that every CUDA kernel
// kiln launches runs on: generator-built eager kernels, compiled Halide pipelines (through the
// runtime's context and stream handlers), cuBLAS and copies. Work on the stream is ordered, so
// the host never waits except at host syncs (item, to_vector, to(cpu)) and explicit
// cuda_synchronize(); counters record every copy and every wait so tests can check that none is
// hidden.
//
//   CudaContext& c = cuda_context(0);
//   launch(..., c.stream);  cuda_synchronize();
//   CudaCounters n = cuda_counters();   // copies by direction, host waits
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/cuda/cuda_api.h"

namespace kiln {

struct CudaContext {
  int index = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::string name;  // "NVIDIA H200"

  // cuBLAS bound to the stream, created on first use, with its workspace.
  cublasHandle_t cublas();
  // cuBLASLt (GEMMs with epilogues), created on first use; its calls take the stream and
  // cuBLAS's workspace (work on the one stream never overlaps).
  cublasLtHandle_t cublaslt();
  void* gemm_workspace() { return cublas(), workspace_; }
  size_t gemm_workspace_bytes() { return cublas(), workspace_bytes_; }

 private:
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// The context of CUDA device `index`, created on first use; kiln::Error when CUDA is unavailable
// or the index is out of range. Installs the Halide runtime's context and stream handlers.
CudaContext& cuda_context(int index = 0);

// Waits for all work queued on the stream (counted as a host wait).
void cuda_synchronize(int index = 0);
// Waits for the stream of every device whose context kiln has made; makes none.
void cuda_synchronize_created();

struct CudaCounters {
  uint64_t host_to_device = 0;    // copies, each direction separately
  uint64_t device_to_host = 0;
  uint64_t device_to_device = 0;
  uint64_t synchronizations = 0;  // host waits on the stream
  uint64_t argument_uploads = 0;  // cuda_upload_arguments calls (no tensor data, no wait)
};
CudaCounters cuda_counters();

// Byte copies on the stream. device_to_host waits for the stream (the host reads the bytes next).
void cuda_copy_to_device(CUdeviceptr dst, const void* src, size_t nbytes, int index = 0);
void cuda_copy_to_host(void* dst, CUdeviceptr src, size_t nbytes, int index = 0);
void cuda_copy_on_device(CUdeviceptr dst, CUdeviceptr src, size_t nbytes, int index = 0);
// Launch arguments too large for a kernel's parameters (cuBLAS's pointer arrays), copied to the
// device on the stream without a host wait: staged through a ring of kArgumentSlots pinned host
// slots, one reused only after the copy that last read it has run (the host waits only when it is
// that many uploads ahead of the device). The device copy lives in the same slot of a device ring,
// so work queued right after the upload reads it before a later upload overwrites it.
// kiln::Error when nbytes exceeds kArgumentSlotBytes.
inline constexpr size_t kArgumentSlots = 64, kArgumentSlotBytes = 16 << 10;
CUdeviceptr cuda_upload_arguments(const void* src, size_t nbytes, int index = 0);

// Launch arguments uploaded while a CUDA graph is captured (graph/cuda_graphs.h). A captured
// graph's arguments never change (they name the graph's own memory, which every replay reuses),
// so none is copied inside the graph (a copy node costs a replay several microseconds of idle
// device on each side): each gets device memory of its own, filled once by upload() after the
// capture ends, read by every replay and freed with the graph. Not counted in
// CudaCounters::argument_uploads.
struct CapturedArguments {
  int index = 0;
  std::vector<CUdeviceptr> device;
  std::vector<std::vector<char>> bytes;  // what device[i] must hold
  CapturedArguments() = default;
  CapturedArguments(const CapturedArguments&) = delete;
  CapturedArguments& operator=(const CapturedArguments&) = delete;
  ~CapturedArguments();
  // Copies every argument to its device memory and waits (call it after the capture has ended).
  void upload();
};
// Sends device `into.index`'s uploads into `into` for the scope's lifetime.
class ArgumentCaptureScope {
 public:
  explicit ArgumentCaptureScope(CapturedArguments& into);
  ~ArgumentCaptureScope();
  ArgumentCaptureScope(const ArgumentCaptureScope&) = delete;
  ArgumentCaptureScope& operator=(const ArgumentCaptureScope&) = delete;

 private:
  int index_;
};
// Fills n elements of `element_size` bytes (1, 2, 4 or 8) with the bytes at `value`, on the
// stream (no host copy, no wait).
void cuda_fill(CUdeviceptr dst, const void* value, size_t element_size, size_t n, int index = 0);

// The Halide runtime's CUDA handlers (halide_set_cuda_acquire_context and friends) that put every
// Halide kernel in device 0's primary context and on kiln's stream. Installed into the eager
// kernels' runtime when the first context is made, and into the runtime of cached pipelines by
// schedules/shared_library.cpp.
int kiln_cuda_acquire_context(void* user_context, void** ctx, bool create);
int kiln_cuda_release_context(void* user_context);
int kiln_cuda_get_stream(void* user_context, void* ctx, void** stream);

// Elapsed device time between two points of the stream, for benchmarks:
//   CudaTimer t; t.start(); ...; float ms = t.stop_ms();
class CudaTimer {
 public:
  explicit CudaTimer(int index = 0);
  ~CudaTimer();
  CudaTimer(const CudaTimer&) = delete;
  CudaTimer& operator=(const CudaTimer&) = delete;
  void start();
  float stop_ms();  // waits for the end event

 private:
  int index_;
  CUevent begin_ = nullptr, end_ = nullptr;
};

// Times each of `count` candidate launches on device `index`'s stream: each runs once (loading its
// kernels), then three times between events; returns each one's median in milliseconds. For the
// choices a library's heuristic ranks but does not measure (cuBLASLt's algorithms, cuDNN's plans).
std::vector<double> time_candidates(int index, size_t count, const std::function<void(size_t)>& run);

// Points on the stream recorded in order and read together at the end (one wait), for timing many
// steps without a host wait between them:
//   CudaMarks m; m.mark(); step1(); m.mark(); step2(); m.mark();
//   std::vector<double> ms = m.intervals_ms();   // {step1, step2}; clears the marks
class CudaMarks {
 public:
  explicit CudaMarks(int index = 0);
  ~CudaMarks();
  CudaMarks(const CudaMarks&) = delete;
  CudaMarks& operator=(const CudaMarks&) = delete;
  void mark();
  size_t size() const { return used_; }
  std::vector<double> intervals_ms();

 private:
  int index_;
  std::vector<CUevent> events_;
  size_t used_ = 0;
};

}  // namespace kiln
