#include "dsl/cuda/nccl_api.h"

#include "dsl/cuda/cuda_library.h"
#include "dsl/error.h"

namespace kiln {

namespace {

const CudaLibrary<NcclApi>& loaded() {
  static const CudaLibrary<NcclApi> l = load_cuda_library<NcclApi>(
      {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"}, "NCCL (libnccl.so.2)", "libnccl",
      [](void* lib, NcclApi& a, std::string& missing) {
        resolve(lib, "ncclGetVersion", a.ncclGetVersion, missing);
        resolve(lib, "ncclGetUniqueId", a.ncclGetUniqueId, missing);
        resolve(lib, "ncclCommInitRank", a.ncclCommInitRank, missing);
        resolve(lib, "ncclCommDestroy", a.ncclCommDestroy, missing);
        resolve(lib, "ncclCommAbort", a.ncclCommAbort, missing);
        resolve(lib, "ncclCommGetAsyncError", a.ncclCommGetAsyncError, missing);
        resolve(lib, "ncclGetErrorString", a.ncclGetErrorString, missing);
        resolve(lib, "ncclGetLastError", a.ncclGetLastError, missing);
        resolve(lib, "ncclAllReduce", a.ncclAllReduce, missing);
        resolve(lib, "ncclBroadcast", a.ncclBroadcast, missing);
        resolve(lib, "ncclAllGather", a.ncclAllGather, missing);
        resolve(lib, "ncclReduceScatter", a.ncclReduceScatter, missing);
      });
  return l;
}

}  // namespace

bool nccl_available() { return loaded().reason.empty(); }

std::string nccl_unavailable_reason() { return loaded().reason; }

const NcclApi& nccl_api() {
  KILN_CHECK(nccl_available(), "nccl: ", nccl_unavailable_reason());
  return loaded().api;
}

void check_nccl(ncclResult_t r, const std::string& what, ncclComm_t comm) {
  if (r == nccl::kSuccess) return;
  const NcclApi& a = nccl_api();
  const char* last = a.ncclGetLastError ? a.ncclGetLastError(comm) : nullptr;
  throw_error(what, ": ", a.ncclGetErrorString(r), last && *last ? std::string(" (") + last + ")" : "");
}

}  // namespace kiln
