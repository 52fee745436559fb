// cat and stack. stack(xs, dim) is cat of the inputs each unsqueezed at dim, so it needs equal
// shapes and has one op definition to fuse and differentiate: cat's.
//
//   Tensor c = cat({a, b}, 1);      // [2, 3] and [2, 5] -> [2, 8]
//   Tensor s = stack({a, a}, 0);    // [2, 3] twice -> [2, 2, 3]
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  return dispatch(op_def("cat"), xs, {{"dim", dim}})[0];
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "stack: expects at least one tensor, got an empty list");
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].defined(), "stack: input ", i, " is an undefined tensor");
    KILN_CHECK(xs[i].impl().shape == xs[0].impl().shape, "stack: input ", i, " has shape ", to_string(xs[i].impl().shape),
               " but input 0 has shape ", to_string(xs[0].impl().shape), "; stack needs equal shapes");
  }
  int64_t r = xs[0].dim() + 1;
  KILN_CHECK(dim >= -r && dim < r, "stack: dim ", dim, " out of range for stacking tensors of shape ",
             to_string(xs[0].impl().shape), " (expected ", -r, " <= dim <= ", r - 1, ")");
  int64_t d = dim < 0 ? dim + r : dim;
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(unsqueeze(x, d));
  return cat(parts, d);
}

}  // namespace kiln
