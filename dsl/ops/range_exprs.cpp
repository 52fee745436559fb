// The range rule of ranges.h as Halide expressions (kiln_defs only; the host form is ranges.cpp).
#include <Halide.h>

#include "dsl/ops/ranges.h"

namespace kiln {

Halide::Expr range_element(const RangeParams& r, const Halide::Expr& i, int64_t count) {
  if (r.exact_last)
    return range_element(Halide::Expr(r.start), Halide::Expr(r.step), Halide::Expr(r.last), i, Halide::Expr(int32_t(count)));
  return Halide::Expr(r.start) + Halide::cast<double>(i) * Halide::Expr(r.step);
}

Halide::Expr range_element(const Halide::Expr& start, const Halide::Expr& step, const Halide::Expr& last,
                           const Halide::Expr& i, const Halide::Expr& count) {
  return Halide::select(i == count - 1, last, start + Halide::cast<double>(i) * step);
}

}  // namespace kiln
