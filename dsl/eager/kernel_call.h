// Calling generator-built kernels on tensors: the canonical strided form that bounds the number
// of kernel variants, and the Halide buffers that describe tensors to the kernels.
//
// Canonical form: dims of size 1 are dropped and neighbouring dims that every operand walks
// contiguously are merged; what remains (at most kMaxKernelRank dims, innermost first) goes to
// the kernel with each operand's strides, stride 0 for broadcast dims. Ranks above that loop
// over the outer dims on the host.
#pragma once
#include <HalideRuntime.h>

#include <string>
#include <vector>

#include "dsl/kernel_table.h"
#include "dsl/tensor.h"

namespace kiln {

inline constexpr int kMaxKernelRank = 4;

// A halide_buffer_t over a tensor's memory, with dims given innermost first.
struct KernelBuffer {
  halide_buffer_t buf{};
  halide_dimension_t dims[8]{};

  KernelBuffer(const Tensor& t, const std::vector<int64_t>& extents_inner_first,
               const std::vector<int64_t>& strides_inner_first, int64_t extra_offset = 0);
  KernelBuffer(const KernelBuffer&) = delete;
  KernelBuffer& operator=(const KernelBuffer&) = delete;
};

// Runs a kernel; a failure inside Halide becomes kiln::Error naming `what`.
void call_kernel(KernelFn fn, std::vector<void*> args, std::string_view what);

// Halide's error handler, for the eager kernels' runtime and the standalone runtime of cached
// pipelines alike: it keeps the calling thread's messages for call_halide.
void capture_halide_error(void* user_context, const char* message);
// Calls an argv entry point (a kernel, a compiled region, an AOT model's region) and returns its
// status; when it fails, `message` holds what Halide reported.
int call_halide(KernelFn fn, void** args, std::string& message);

// The kernel of that name; throws kiln::Error naming `op` when it was not built.
KernelFn require_kernel(const std::string& name, std::string_view op);

// Runs a rank-4 pointwise kernel over `out` (any strides) reading `ins`, which must already have
// out's shape through broadcast strides (use broadcast_to_view).
void run_pointwise_kernel(KernelFn fn, const std::vector<Tensor>& ins, const Tensor& out,
                          std::string_view op);

}  // namespace kiln
