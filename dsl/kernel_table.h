// The eager kernels that generators/ built at build time, by name (kiln_<op>[_<variant>]_<dtype>),
// in Halide's argv calling convention: args[i] points to a halide_buffer_t (buffers, inputs then
// outputs) or to a scalar value.
#pragma once
#include <span>
#include <string_view>

namespace kiln {

using KernelFn = int (*)(void** args);

struct KernelEntry {
  const char* name;
  KernelFn fn;
};

// Defined by the generated table in generators/.
std::span<const KernelEntry> eager_kernel_table();

// The kernel of that name, or nullptr.
KernelFn find_kernel(std::string_view name);

}  // namespace kiln
