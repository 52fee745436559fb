// Seeing groups of a tensor's dims as single strided dims: the canonical low-rank forms of the
// runners that work along rows (reductions, softmax, layer_norm, cross_entropy).
//
//   StridedDim k = collapse_dims(x, {0, 1});  // dims 0 and 1 as one dim, if the layout allows
//   if (!k.ok) x = contiguous_copy(permuted(x, {0, 1, 2}));
#pragma once
#include <vector>

#include "dsl/tensor.h"

namespace kiln {

struct StridedDim {
  int64_t extent = 1;
  int64_t stride = 0;
  bool ok = true;  // false: the dims do not collapse into one strided dim
};

// Dims `dims` of x (outermost first) as one strided dim; size-1 dims are skipped, no dims give
// extent 1. They collapse when each dim's stride steps over the whole next dim.
StridedDim collapse_dims(const Tensor& x, const std::vector<int>& dims);

// x with its dims reordered (a view: metadata only, no dispatch).
Tensor permuted(const Tensor& x, const std::vector<int>& order);
// A dense copy of x in its own dim order, through the copy kernel (no dispatch).
Tensor contiguous_copy(const Tensor& x);

}  // namespace kiln
