#include "dsl/cuda/cudnn_api.h"

#include <memory>
#include <mutex>
#include <vector>

#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/cuda_library.h"
#include "dsl/error.h"

namespace kiln {

namespace {

const CudaLibrary<CudnnApi>& loaded() {
  static const CudaLibrary<CudnnApi> l = load_cuda_library<CudnnApi>(
      {"libcudnn.so.9", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so.9"}, "cuDNN 9 (libcudnn.so.9)",
      "libcudnn",
      [](void* lib, CudnnApi& a, std::string& missing) {
        resolve(lib, "cudnnGetVersion", a.cudnnGetVersion, missing);
        resolve(lib, "cudnnCreate", a.cudnnCreate, missing);
        resolve(lib, "cudnnSetStream", a.cudnnSetStream, missing);
        resolve(lib, "cudnnGetErrorString", a.cudnnGetErrorString, missing);
        resolve(lib, "cudnnGetLastErrorString", a.cudnnGetLastErrorString, missing);
        resolve(lib, "cudnnBackendCreateDescriptor", a.cudnnBackendCreateDescriptor, missing);
        resolve(lib, "cudnnBackendDestroyDescriptor", a.cudnnBackendDestroyDescriptor, missing);
        resolve(lib, "cudnnBackendFinalize", a.cudnnBackendFinalize, missing);
        resolve(lib, "cudnnBackendSetAttribute", a.cudnnBackendSetAttribute, missing);
        resolve(lib, "cudnnBackendGetAttribute", a.cudnnBackendGetAttribute, missing);
        resolve(lib, "cudnnBackendExecute", a.cudnnBackendExecute, missing);
      },
      [](void*, const CudnnApi& a) {
        return a.cudnnGetVersion() < 90000 ? "cuDNN " + std::to_string(a.cudnnGetVersion()) + " is older than 9.0"
                                           : std::string();
      });
  return l;
}

}  // namespace

bool cudnn_available() { return loaded().reason.empty(); }

std::string cudnn_unavailable_reason() { return loaded().reason; }

const CudnnApi& cudnn_api() {
  KILN_CHECK(loaded().reason.empty(), "cudnn: ", loaded().reason);
  return loaded().api;
}

size_t cudnn_version() { return cudnn_api().cudnnGetVersion(); }

cudnnHandle_t cudnn_handle(int index) {
  static std::mutex mu;
  static std::vector<cudnnHandle_t> handles;
  const CudnnApi& api = cudnn_api();
  CudaContext& ctx = cuda_context(index);  // makes the device's context current
  std::lock_guard<std::mutex> lock(mu);
  if (handles.size() <= size_t(index)) handles.resize(size_t(index) + 1, nullptr);
  cudnnHandle_t& h = handles[size_t(index)];
  if (!h) {
    check_cudnn(api.cudnnCreate(&h), "cudnn: creating the handle");
    check_cudnn(api.cudnnSetStream(h, ctx.stream), "cudnn: binding the handle to kiln's stream");
  }
  return h;
}

void check_cudnn(cudnnStatus_t rc, const std::string& what) {
  if (rc == cudnn::kStatusSuccess) return;
  const CudnnApi& api = loaded().api;
  std::string message(1024, '\0');
  if (api.cudnnGetLastErrorString) api.cudnnGetLastErrorString(message.data(), message.size());
  message.resize(message.find('\0'));
  const char* name = api.cudnnGetErrorString ? api.cudnnGetErrorString(rc) : nullptr;
  throw_error(what, ": cuDNN error ", rc, " (", name ? name : "unknown", ")",
              message.empty() ? std::string() : ": " + message);
}

}  // namespace kiln
