#include "dsl/cuda/nccl_api.h"

#include "dsl/cuda/dynamic_library.h"
#include "dsl/error.h"

namespace kiln {

namespace {

struct Loaded {
  NcclApi api{};
  std::string reason;  // "" when loaded
};

Loaded load() {
  Loaded l;
  if (!cuda_available()) {
    l.reason = "no CUDA device is usable: " + cuda_unavailable_reason();
    return l;
  }
  void* lib = open_first({"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"});
  if (!lib) {
    l.reason = "NCCL (libnccl.so.2) is not on the library path";
    return l;
  }
  NcclApi& a = l.api;
  std::string missing;
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
  if (!missing.empty()) l.reason = "libnccl lacks " + missing + " (kiln needs NCCL 2.x)";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
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
