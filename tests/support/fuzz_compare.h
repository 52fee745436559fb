// Comparing a fuzz program's outputs between two runs (compiled against eager, CUDA against the
// CPU): each output's tolerance and a readable description of the first differences.
#pragma once
#include <string>

#include "support/fuzz_program.h"
#include "support/reference.h"

namespace kiln::test {

// The tolerance of one output: its precision's (the least precise float dtype it went through);
// integers and bool are exact. `widen`, for runs that reorder or fuse float math, grows it with
// the chain length and measures the absolute part against the output's largest element.
Tolerance output_tolerance(const FuzzOutput& o, const Tensor& want, bool widen);

// "" when `got` has want's shape and dtype and every element is within `tol`; otherwise what
// differs. Tensors on any device.
std::string mismatch(const Tensor& got, const Tensor& want, Tolerance tol);

}  // namespace kiln::test
