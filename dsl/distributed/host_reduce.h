// The element math of collectives on host buffers (Gloo's all-reduce calls a reduce function on
// pairs of chunks): sum, max and min of each dtype Gloo reduces, 16-bit floats through f32 and
// rounded back (as NCCL does for bf16 sums), and the division that makes a sum a mean.
#pragma once
#include <cstddef>

#include "dsl/distributed/process_group.h"

namespace kiln::distributed {

// out[i] = a[i] op b[i] for n elements (mean: the sum; divide() finishes it).
using HostReduce = void (*)(ReduceOp op, void* out, const void* a, const void* b, size_t n);

// The reduction of `dtype` elements (f32, f64, f16, bf16, i32, i64); kiln::Error naming `what`
// for another dtype.
HostReduce host_reduce(DType dtype, std::string_view what);

// t[i] /= n, in t's dtype.
void divide(const Tensor& t, int n);

}  // namespace kiln::distributed
