// NCCL, loaded at run time with dlopen like the driver, cuBLAS and cuDNN: kiln builds and runs
// without it and asks for it only for collectives on CUDA tensors (dsl/distributed/). Types are
// plain integers and pointers so that no NCCL header is needed to build kiln;
// tests/dsl/test_cuda_api.cpp checks the values against the toolkit's nccl.h where it is
// installed.
#pragma once
#include <cstddef>
#include <string>

#include "dsl/cuda/cuda_api.h"

namespace kiln {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;
struct ncclUniqueId {
  char internal[128];
};

namespace nccl {
enum DataType : int { kInt32 = 2, kInt64 = 4, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9 };
enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr ncclResult_t kSuccess = 0;
constexpr ncclResult_t kInProgress = 7;
}  // namespace nccl

struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int*);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*ncclGetErrorString)(ncclResult_t);
  const char* (*ncclGetLastError)(ncclComm_t);
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclAllGather)(const void*, void*, size_t, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
};

// True when a CUDA device is usable and libnccl.so.2 loads. Never throws.
bool nccl_available();
// Why NCCL is unavailable ("" when it is available).
std::string nccl_unavailable_reason();
// The loaded API; kiln::Error naming the reason when NCCL is unavailable.
const NcclApi& nccl_api();
// Throws kiln::Error "what: <NCCL's message>" unless r is success.
void check_nccl(ncclResult_t r, const std::string& what, ncclComm_t comm = nullptr);

}  // namespace kiln
