// A CUDA kernel written as source text and compiled at run time with NVRTC (libnvrtc of the CUDA
// toolkit, loaded with dlopen like the driver, so kiln builds and runs without it): the CUDA half
// of a custom op (dsl/custom_op.h) without a build step. The source is compiled once a process
// for each device's compute capability (on first launch) and launched on kiln's stream of that
// device, so it orders with kiln's own kernels and copies.
//
//   static const RuntimeKernel k(R"(
//     extern "C" __global__ void scale(const float* x, float* y, float s, long long n) {
//       long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
//       if (i < n) y[i] = s * x[i];
//     })", "scale");
//   k.launch(y.device().index, {unsigned((n + 255) / 256)}, {256}, {x, y, 2.0f, n});
//
// Arguments are tensors (their device pointers), pointers, or scalars of the kernel's parameter
// types (int32_t, int64_t for `long long`, float, double). A compile error is a kiln::Error with
// NVRTC's log.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dsl/cuda/cuda_api.h"
#include "dsl/tensor.h"

namespace kiln {

struct LaunchDims {
  unsigned x = 1, y = 1, z = 1;
};

// One kernel argument, by value (cuLaunchKernel reads each from its address).
class KernelArg {
 public:
  KernelArg(const Tensor& t);  // its data's device pointer
  KernelArg(const void* p);
  KernelArg(int32_t v) { set(v); }
  KernelArg(int64_t v) { set(v); }
  KernelArg(float v) { set(v); }
  KernelArg(double v) { set(v); }
  void* address() { return bytes_; }

 private:
  template <typename T>
  void set(T v) {
    static_assert(sizeof(T) <= sizeof(bytes_));
    std::memcpy(bytes_, &v, sizeof(T));
  }
  alignas(8) unsigned char bytes_[8] = {};
};

class RuntimeKernel {
 public:
  // `function`: the kernel's name (declare it extern "C", or give its mangled name). `options`:
  // NVRTC options beside the target architecture ("-use_fast_math", "-DTILE=32").
  RuntimeKernel(std::string source, std::string function, std::vector<std::string> options = {});

  // The PTX for compute capability major.minor (compiled once; no GPU needed).
  std::string ptx(int major, int minor) const;
  // Launches on kiln's stream of CUDA device `device`; returns as soon as it is queued.
  void launch(int device, LaunchDims grid, LaunchDims block, std::vector<KernelArg> args,
              unsigned shared_bytes = 0) const;

  const std::string& function() const { return function_; }

 private:
  std::string source_, function_;
  std::vector<std::string> options_;
  mutable std::mutex mu_;
  mutable std::map<int, std::string> ptx_;         // by major * 10 + minor
  mutable std::map<int, CUfunction> functions_;    // by device index
};

// Whether NVRTC loads on this machine ("" when it does, else why not).
std::string nvrtc_unavailable_reason();

}  // namespace kiln
