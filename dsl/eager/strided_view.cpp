#include "dsl/eager/strided_view.h"

#include "dsl/eager/runners.h"

namespace kiln {

StridedDim collapse_dims(const Tensor& x, const std::vector<int>& dims) {
  StridedDim c;
  bool first = true;
  for (int d : dims) {
    int64_t n = x.size(d), s = x.stride(d);
    if (n == 1) continue;
    if (first) {
      c = {n, s, true};
      first = false;
    } else if (c.stride == s * n) {
      c.extent *= n;
      c.stride = s;
    } else {
      c.ok = false;
    }
  }
  return c;
}

Tensor permuted(const Tensor& x, const std::vector<int>& order) {
  Shape shape;
  Strides strides;
  for (int d : order) {
    shape.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  return Tensor::make_view(x.storage(), shape, strides, x.storage_offset(), x.dtype());
}

Tensor contiguous_copy(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.options());
  copy_into(out, x);
  return out;
}

}  // namespace kiln
