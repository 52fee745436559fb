// The range rule of ranges.h on the host (compiled once, into kiln_defs_runtime); its Halide form
// is range_exprs.cpp.
#include "dsl/ops/ranges.h"

#include "dsl/error.h"

namespace kiln {

RangeParams range_params(std::string_view op, const Attrs& a, int64_t count) {
  RangeParams r;
  r.start = a.get<double>("start");
  if (op == "arange") {
    r.step = a.get<double>("step");
    r.last = r.start + double(count - 1) * r.step;
  } else {
    KILN_CHECK(op == "linspace", "range_params: ", op, " is not a range op");
    int64_t steps = a.get<int64_t>("steps");
    r.step = steps > 1 ? (a.get<double>("end") - r.start) / double(steps - 1) : 0;
    r.last = steps > 1 ? a.get<double>("end") : r.start;
    r.exact_last = steps > 1;
  }
  return r;
}

double range_element(const RangeParams& r, int64_t i, int64_t count) {
  return r.exact_last && i == count - 1 ? r.last : r.start + double(i) * r.step;
}

}  // namespace kiln
