// The eager kernels that generators/ built at build time, by name (kiln_<op>[_<variant>]_<dtype>)
// and device (one table for the CPU, one for CUDA, same names), in Halide's argv calling
// convention: args[i] points to a halide_buffer_t (buffers, inputs then outputs) or to a scalar.
#pragma once
#include <span>
#include <string_view>

namespace kiln {

using KernelFn = int (*)(void** args);

struct KernelEntry {
  const char* name;
  KernelFn fn;
};

// Defined by the generated tables in generators/.
std::span<const KernelEntry> eager_kernel_table();
std::span<const KernelEntry> eager_cuda_kernel_table();

// The kernel of that name for the device of the op being run (KernelDeviceScope), or nullptr.
KernelFn find_kernel(std::string_view name);

// While alive, find_kernel looks in the table of `cuda ? CUDA : CPU`. The eager dispatcher opens
// one per op, for the device of the op's tensors.
class KernelDeviceScope {
 public:
  explicit KernelDeviceScope(bool cuda);
  ~KernelDeviceScope();
  KernelDeviceScope(const KernelDeviceScope&) = delete;
  KernelDeviceScope& operator=(const KernelDeviceScope&) = delete;

 private:
  bool saved_;
};

}  // namespace kiln
