#include "dsl/cuda/cuda_api.h"

#include <mutex>

#include "dsl/cuda/dynamic_library.h"
#include "dsl/error.h"

namespace kiln {

namespace {

struct Loaded {
  CudaApi api{};
  std::string reason;  // "" when the driver loaded and has a device
  bool cublas_loaded = false;
  std::string cublas_reason;
};

void load_driver(Loaded& l) {
  void* lib = open_first({"libcuda.so.1", "libcuda.so"});
  if (!lib) {
    l.reason = "the CUDA driver library (libcuda.so.1) is not installed on this machine";
    return;
  }
  CudaApi& a = l.api;
  std::string missing;
  resolve(lib, "cuInit", a.cuInit, missing);
  resolve(lib, "cuDeviceGetCount", a.cuDeviceGetCount, missing);
  resolve(lib, "cuDeviceGet", a.cuDeviceGet, missing);
  resolve(lib, "cuDeviceGetName", a.cuDeviceGetName, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, missing);
  resolve(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, missing);
  resolve(lib, "cuStreamCreate", a.cuStreamCreate, missing);
  resolve(lib, "cuStreamSynchronize", a.cuStreamSynchronize, missing);
  resolve(lib, "cuStreamWaitEvent", a.cuStreamWaitEvent, missing);
  resolve(lib, "cuStreamDestroy_v2", a.cuStreamDestroy, missing);
  resolve(lib, "cuMemAlloc_v2", a.cuMemAlloc, missing);
  resolve(lib, "cuMemFree_v2", a.cuMemFree, missing);
  resolve(lib, "cuMemGetInfo_v2", a.cuMemGetInfo, missing);
  resolve(lib, "cuMemAllocHost_v2", a.cuMemAllocHost, missing);
  resolve(lib, "cuMemFreeHost", a.cuMemFreeHost, missing);
  resolve(lib, "cuMemcpyHtoDAsync_v2", a.cuMemcpyHtoDAsync, missing);
  resolve(lib, "cuMemcpyDtoHAsync_v2", a.cuMemcpyDtoHAsync, missing);
  resolve(lib, "cuMemcpyDtoDAsync_v2", a.cuMemcpyDtoDAsync, missing);
  resolve(lib, "cuMemsetD8Async", a.cuMemsetD8Async, missing);
  resolve(lib, "cuMemsetD16Async", a.cuMemsetD16Async, missing);
  resolve(lib, "cuMemsetD32Async", a.cuMemsetD32Async, missing);
  resolve(lib, "cuMemsetD2D32Async", a.cuMemsetD2D32Async, missing);
  resolve(lib, "cuEventCreate", a.cuEventCreate, missing);
  resolve(lib, "cuEventRecord", a.cuEventRecord, missing);
  resolve(lib, "cuEventSynchronize", a.cuEventSynchronize, missing);
  resolve(lib, "cuEventQuery", a.cuEventQuery, missing);
  resolve(lib, "cuEventElapsedTime", a.cuEventElapsedTime, missing);
  resolve(lib, "cuEventDestroy_v2", a.cuEventDestroy, missing);
  resolve(lib, "cuGetErrorString", a.cuGetErrorString, missing);
  resolve(lib, "cuStreamBeginCapture_v2", a.cuStreamBeginCapture, missing);
  resolve(lib, "cuStreamEndCapture", a.cuStreamEndCapture, missing);
  resolve(lib, "cuGraphInstantiateWithFlags", a.cuGraphInstantiateWithFlags, missing);
  resolve(lib, "cuGraphLaunch", a.cuGraphLaunch, missing);
  resolve(lib, "cuGraphExecDestroy", a.cuGraphExecDestroy, missing);
  resolve(lib, "cuGraphDestroy", a.cuGraphDestroy, missing);
  resolve(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, missing);
  resolve(lib, "cuModuleLoadData", a.cuModuleLoadData, missing);
  resolve(lib, "cuModuleGetFunction", a.cuModuleGetFunction, missing);
  resolve(lib, "cuLaunchKernel", a.cuLaunchKernel, missing);
  resolve(lib, "cuProfilerStart", a.cuProfilerStart, missing);
  resolve(lib, "cuProfilerStop", a.cuProfilerStop, missing);
  if (!missing.empty()) {
    l.reason = "the CUDA driver library lacks " + missing + " (driver too old?)";
    return;
  }
  if (CUresult rc = a.cuInit(0); rc != 0) {
    const char* text = nullptr;
    a.cuGetErrorString(rc, &text);
    l.reason = std::string("cuInit failed: ") + (text ? text : "unknown error") + " (error " + std::to_string(rc) + ")";
    return;
  }
  int count = 0;
  if (a.cuDeviceGetCount(&count) != 0 || count == 0) l.reason = "the CUDA driver reports no device";
}

void load_cublas(Loaded& l) {
  void* lib = open_first({"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"});
  if (!lib) {
    l.cublas_reason = "cuBLAS (libcublas.so.13) is not on the library path (add /usr/local/cuda/lib64 to LD_LIBRARY_PATH)";
    return;
  }
  std::string missing;
  resolve(lib, "cublasCreate_v2", l.api.cublasCreate, missing);
  resolve(lib, "cublasSetStream_v2", l.api.cublasSetStream, missing);
  resolve(lib, "cublasSetWorkspace_v2", l.api.cublasSetWorkspace, missing);
  resolve(lib, "cublasGemmStridedBatchedEx", l.api.cublasGemmStridedBatchedEx, missing);
  resolve(lib, "cublasGemmBatchedEx", l.api.cublasGemmBatchedEx, missing);
  if (!missing.empty()) {
    l.cublas_reason = "libcublas lacks " + missing;
    return;
  }
  void* lt = open_first({"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13"});
  if (!lt) {
    l.cublas_reason = "cuBLASLt (libcublasLt.so.13) is not on the library path (add /usr/local/cuda/lib64 to LD_LIBRARY_PATH)";
    return;
  }
  resolve(lt, "cublasLtCreate", l.api.cublasLtCreate, missing);
  resolve(lt, "cublasLtMatmulDescCreate", l.api.cublasLtMatmulDescCreate, missing);
  resolve(lt, "cublasLtMatmulDescSetAttribute", l.api.cublasLtMatmulDescSetAttribute, missing);
  resolve(lt, "cublasLtMatrixLayoutCreate", l.api.cublasLtMatrixLayoutCreate, missing);
  resolve(lt, "cublasLtMatmulPreferenceCreate", l.api.cublasLtMatmulPreferenceCreate, missing);
  resolve(lt, "cublasLtMatmulPreferenceSetAttribute", l.api.cublasLtMatmulPreferenceSetAttribute, missing);
  resolve(lt, "cublasLtMatmulPreferenceDestroy", l.api.cublasLtMatmulPreferenceDestroy, missing);
  resolve(lt, "cublasLtMatmulAlgoGetHeuristic", l.api.cublasLtMatmulAlgoGetHeuristic, missing);
  resolve(lt, "cublasLtMatmul", l.api.cublasLtMatmul, missing);
  if (!missing.empty()) l.cublas_reason = "libcublasLt lacks " + missing;
  l.cublas_loaded = missing.empty();
}

Loaded& loaded() {
  static Loaded l = [] {
    Loaded x;
    load_driver(x);
    return x;
  }();
  return l;
}

}  // namespace

bool cuda_available() { return loaded().reason.empty(); }

std::string cuda_unavailable_reason() { return loaded().reason; }

const CudaApi& cuda_api() {
  const Loaded& l = loaded();
  KILN_CHECK(l.reason.empty(), "cuda: no CUDA device is usable: ", l.reason);
  return l.api;
}

const CudaApi& cuda_api_with_cublas() {
  cuda_api();
  static std::once_flag once;
  std::call_once(once, [] { load_cublas(loaded()); });
  KILN_CHECK(loaded().cublas_loaded, "cuda: ", loaded().cublas_reason);
  return loaded().api;
}

void check_cuda(CUresult rc, const char* what) {
  if (rc == 0) return;
  const char* text = nullptr;
  if (cuda_api().cuGetErrorString) cuda_api().cuGetErrorString(rc, &text);
  throw_error(what, ": CUDA error ", rc, " (", text ? text : "unknown", ")");
}

void check_cublas(cublasStatus_t rc, const char* what) {
  if (rc == 0) return;
  throw_error(what, ": cuBLAS error ", rc,
              rc == 7 ? " (CUBLAS_STATUS_INVALID_VALUE: a size or leading dimension is out of range)"
              : rc == 3 ? " (CUBLAS_STATUS_ALLOC_FAILED)"
              : rc == 15 ? " (CUBLAS_STATUS_NOT_SUPPORTED: this dtype combination)"
                         : "");
}

}  // namespace kiln
