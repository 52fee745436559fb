// Eager runner of cat: allocates the output and copies each input (converted to the result
// dtype) into its slice along the cat dim with the generator-built strided copy kernel.
#include "dsl/dispatch.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"

namespace kiln {

TensorList run_cat(const OpDef& def, const TensorList& in, const Attrs& a) {
  TensorMeta om = def.infer(metas_of(in), a)[0];
  Tensor out = Tensor::empty(om.shape, {om.dtype, om.device});
  if (out.numel() == 0) return {out};
  int d = wrap_dim("cat", a.get<int64_t>("dim"), out.dim());
  int64_t start = 0;
  for (const Tensor& x : in) {
    if (x.dim() != out.dim()) continue;  // a skipped 1-D [0] input
    int64_t n = x.size(d);
    if (n == 0) continue;
    Tensor dst = Tensor::make_view(out.storage(), x.shape(), out.strides(),
                                   start * out.strides()[d], out.dtype());
    copy_into(dst, convert(x, out.dtype()));
    start += n;
  }
  return {out};
}

}  // namespace kiln
