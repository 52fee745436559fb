// The CUDA driver and cuBLAS entry points kiln calls, loaded at run time with dlopen. kiln builds
// and runs on machines without CUDA (CPU tensors only); CUDA is found when the first CUDA tensor
// is made. Types are the driver's, written as plain integers and pointers so that no CUDA header
// is needed to build kiln (tests/dsl/test_cuda_api.cpp checks them against the toolkit's headers
// where the toolkit is installed).
//
//   if (cuda_available()) { const CudaApi& api = cuda_api(); api.cuStreamSynchronize(s); }
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
// CUdevice_attribute values kiln reads.
inline constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
// CUstreamCaptureMode: relaxed lets a capturing thread allocate (cuMemAlloc) as it runs.
inline constexpr int kStreamCaptureModeRelaxed = 2;
inline constexpr CUresult kCudaErrorNotReady = 600;  // CUDA_ERROR_NOT_READY
using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t*;
// cublasLtMatmulHeuristicResult_t: the algorithm (an opaque 64 bytes), its workspace, its status.
struct CublasLtHeuristic {
  uint64_t algo[8];
  size_t workspace_size;
  cublasStatus_t state;
  float waves;
  int reserved[4];
};

// cuBLAS enum values used by kiln (library_types.h, cublas_api.h).
enum CublasValue : int {
  kCublasOpN = 0,
  kCublasOpT = 1,
  kCudaR32F = 0,
  kCudaR16F = 2,
  kCudaR64F = 1,
  kCudaR16BF = 14,
  kCublasCompute32F = 68,
  kCublasCompute32FFastTf32 = 77,
  kCublasCompute64F = 70,
  kCublasGemmDefault = -1,
  // cublasLt.h
  kCublasLtDescTransA = 3,
  kCublasLtDescTransB = 4,
  kCublasLtDescEpilogue = 7,
  kCublasLtDescBiasPointer = 8,
  kCublasLtDescEpilogueAuxPointer = 11,
  kCublasLtDescEpilogueAuxLd = 12,
  kCublasLtEpilogueBias = 4,
  kCublasLtEpilogueGeluBias = 36,
  kCublasLtEpilogueGeluAuxBias = 164,
  kCublasLtEpilogueDGelu = 192,
  kCublasLtEpilogueBgradb = 512,
  kCublasLtPrefMaxWorkspaceBytes = 1,
};

struct CudaApi {
  // Driver (libcuda.so.1).
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream*, unsigned int);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);                     // cuStreamDestroy_v2
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);              // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr);                        // cuMemFree_v2
  CUresult (*cuMemGetInfo)(size_t*, size_t*);                // cuMemGetInfo_v2
  CUresult (*cuMemAllocHost)(void**, size_t);                // cuMemAllocHost_v2 (pinned)
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);        // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);  // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*cuMemsetD2D32Async)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);  // kCudaErrorNotReady while pending
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);                       // cuEventDestroy_v2
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // CUDA graphs: a stream's launches captured, instantiated and replayed (graph/cuda_graphs.h).
  CUresult (*cuStreamBeginCapture)(CUstream, int);           // cuStreamBeginCapture_v2
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  // Modules of PTX and their kernels (dsl/cuda/runtime_kernel.h: custom ops' kernels from NVRTC).
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  // Marks for a profiler (CUPTI, the kernel summary of bench/kernel_summary.cpp); no-ops without one.
  CUresult (*cuProfilerStart)();
  CUresult (*cuProfilerStop)();
  // cuBLAS (libcublas.so.13); null until cublas() is first asked for.
  cublasStatus_t (*cublasCreate)(cublasHandle_t*);           // cublasCreate_v2
  cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream);  // cublasSetStream_v2
  cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t, void*, size_t);  // cublasSetWorkspace_v2
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, int, int, int, int, int, const void*,
                                               const void*, int, int, long long, const void*, int, int,
                                               long long, const void*, void*, int, int, long long, int,
                                               int, int);
  cublasStatus_t (*cublasGemmBatchedEx)(cublasHandle_t, int, int, int, int, int, const void*, const void* const*,
                                        int, int, const void* const*, int, int, const void*, void* const*, int,
                                        int, int, int, int);
  // cuBLASLt (libcublasLt.so.13), loaded with cuBLAS: GEMMs with a bias epilogue.
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t*);
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t*, int, int);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int, const void*, size_t);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t*, int, uint64_t, uint64_t, int64_t);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t*);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t, int, const void*, size_t);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                   cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                   cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                                   CublasLtHeuristic*, int*);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                   cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                                   const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                   const void*, void*, size_t, CUstream);
};

// True when libcuda loads and reports at least one device. Never throws; the first call loads.
bool cuda_available();
// Why CUDA is unavailable ("" when it is available): no driver library, no device, init error.
std::string cuda_unavailable_reason();
// The loaded driver API; kiln::Error naming the reason when CUDA is unavailable.
const CudaApi& cuda_api();
// The same with cuBLAS loaded as well; kiln::Error when libcublas is missing.
const CudaApi& cuda_api_with_cublas();

// Throws kiln::Error "<what>: <driver error name and text>" when rc is not CUDA_SUCCESS.
void check_cuda(CUresult rc, const char* what);
void check_cublas(cublasStatus_t rc, const char* what);

}  // namespace kiln
