#include "dsl/cuda/runtime_kernel.h"

#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/dynamic_library.h"
#include "dsl/error.h"

namespace kiln {

namespace {

using nvrtcProgram = struct _nvrtcProgram*;
using nvrtcResult = int;

struct Nvrtc {
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  std::string reason;  // why it did not load; "" when it did
};

const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc a{};
    void* lib = open_first({"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                            "/usr/local/cuda/lib64/libnvrtc.so"});
    if (!lib) {
      a.reason = "NVRTC (libnvrtc.so.13 of the CUDA toolkit) is not installed on this machine";
      return a;
    }
    std::string missing;
    resolve(lib, "nvrtcCreateProgram", a.nvrtcCreateProgram, missing);
    resolve(lib, "nvrtcCompileProgram", a.nvrtcCompileProgram, missing);
    resolve(lib, "nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize, missing);
    resolve(lib, "nvrtcGetProgramLog", a.nvrtcGetProgramLog, missing);
    resolve(lib, "nvrtcGetPTXSize", a.nvrtcGetPTXSize, missing);
    resolve(lib, "nvrtcGetPTX", a.nvrtcGetPTX, missing);
    resolve(lib, "nvrtcDestroyProgram", a.nvrtcDestroyProgram, missing);
    resolve(lib, "nvrtcGetErrorString", a.nvrtcGetErrorString, missing);
    if (!missing.empty()) a.reason = "libnvrtc lacks " + missing;
    return a;
  }();
  return n;
}

void check_nvrtc(const Nvrtc& n, nvrtcResult rc, const std::string& what) {
  KILN_CHECK(rc == 0, what, ": ", n.nvrtcGetErrorString(rc));
}

}  // namespace

KernelArg::KernelArg(const Tensor& t) {
  KILN_CHECK(t.device().is_cuda(), "a CUDA kernel's argument is a tensor on ", t.device(),
             "; move it with to(Device::cuda())");
  set(t.data_ptr());
}

KernelArg::KernelArg(const void* p) { set(p); }

std::string nvrtc_unavailable_reason() { return nvrtc().reason; }

RuntimeKernel::RuntimeKernel(std::string source, std::string function, std::vector<std::string> options)
    : source_(std::move(source)), function_(std::move(function)), options_(std::move(options)) {}

std::string RuntimeKernel::ptx(int major, int minor) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = ptx_.find(major * 10 + minor); it != ptx_.end()) return it->second;
  const Nvrtc& n = nvrtc();
  KILN_CHECK(n.reason.empty(), "CUDA kernel ", function_, ": ", n.reason);
  nvrtcProgram prog = nullptr;
  std::string file = function_ + ".cu";
  check_nvrtc(n, n.nvrtcCreateProgram(&prog, source_.c_str(), file.c_str(), 0, nullptr, nullptr),
              "CUDA kernel " + function_ + ": nvrtcCreateProgram");
  std::vector<std::string> opts = options_;
  opts.push_back("--gpu-architecture=compute_" + std::to_string(major) + std::to_string(minor));
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult rc = n.nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t log_size = 0;
  n.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) n.nvrtcGetProgramLog(prog, log.data());
  if (rc != 0) {
    n.nvrtcDestroyProgram(&prog);
    throw_error("CUDA kernel ", function_, ": NVRTC could not compile its source (", n.nvrtcGetErrorString(rc),
                "):\n", log.c_str());
  }
  size_t size = 0;
  n.nvrtcGetPTXSize(prog, &size);
  std::string ptx(size, '\0');
  n.nvrtcGetPTX(prog, ptx.data());
  n.nvrtcDestroyProgram(&prog);
  return ptx_[major * 10 + minor] = ptx;
}

void RuntimeKernel::launch(int device, LaunchDims grid, LaunchDims block, std::vector<KernelArg> args,
                           unsigned shared_bytes) const {
  CudaContext& ctx = cuda_context(device);
  const CudaApi& api = cuda_api();
  check_cuda(api.cuCtxSetCurrent(ctx.context), "cuCtxSetCurrent");  // this thread's, for the module and the launch
  CUfunction f = nullptr;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = functions_.find(device);
    if (it != functions_.end()) {
      f = it->second;
    } else {
      lock.unlock();
      int major = 0, minor = 0;
      check_cuda(api.cuDeviceGetAttribute(&major, kDeviceAttributeComputeCapabilityMajor, ctx.device),
                 "cuDeviceGetAttribute");
      check_cuda(api.cuDeviceGetAttribute(&minor, kDeviceAttributeComputeCapabilityMinor, ctx.device),
                 "cuDeviceGetAttribute");
      std::string code = ptx(major, minor);
      CUmodule module = nullptr;
      check_cuda(api.cuModuleLoadData(&module, code.c_str()), ("CUDA kernel " + function_ + ": cuModuleLoadData").c_str());
      check_cuda(api.cuModuleGetFunction(&f, module, function_.c_str()),
                 ("CUDA kernel " + function_ + ": no kernel of that name in its source (declare it extern \"C\")").c_str());
      lock.lock();
      functions_[device] = f;  // the module stays loaded for the process
    }
  }
  std::vector<void*> params;
  for (KernelArg& a : args) params.push_back(a.address());
  check_cuda(api.cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, ctx.stream,
                                params.data(), nullptr),
             ("CUDA kernel " + function_ + ": cuLaunchKernel").c_str());
}

}  // namespace kiln
