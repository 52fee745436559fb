// arange and linspace as one rule: element i of a range of `count` elements is
// start + i * step, and the last one is exactly `last` (linspace's end, which
// start + (count - 1) * step can miss by rounding). The eager CPU loop (dsl/eager/creation.cpp),
// the CUDA kernel (generators/creation_kernels.cpp) and compiled regions (the ops' Halide
// definitions, dsl/ops/creation.cpp) all compute it through these functions.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsl/attrs.h"

namespace Halide {
class Expr;
}

namespace kiln {

struct RangeParams {
  double start = 0, step = 0, last = 0;
  // linspace: the last element is `last` exactly; arange's last is start + (count - 1) * step anyway.
  bool exact_last = false;
};

// The parameters of op ("arange" or "linspace") with attributes `a`, for `count` elements.
RangeParams range_params(std::string_view op, const Attrs& a, int64_t count);

double range_element(const RangeParams& r, int64_t i, int64_t count);
// The same in a compiled region, with the parameters known. An arange has no select on the last
// index: Halide 14 fails to partition a vectorized loop over one (PartitionLoops.cpp:277).
Halide::Expr range_element(const RangeParams& r, const Halide::Expr& i, int64_t count);
// The same with the parameters as pipeline arguments (float64; i and count int32), for a kernel
// that serves every range.
Halide::Expr range_element(const Halide::Expr& start, const Halide::Expr& step, const Halide::Expr& last,
                           const Halide::Expr& i, const Halide::Expr& count);

}  // namespace kiln
