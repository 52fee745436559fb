// The reduction op functions and their Tensor member forms.
#include "dsl/dispatch.h"
#include "dsl/functions.h"

namespace kiln {

namespace {

Tensor reduce(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
              Attrs extra = {}) {
  extra.set("dims", dims);
  extra.set("keepdim", keepdim);
  return dispatch(op_def(op), {x}, extra)[0];
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return reduce("sum", x, dims, keepdim); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return reduce("mean", x, dims, keepdim); }
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return reduce("max", x, dims, keepdim); }
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { return reduce("min", x, dims, keepdim); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return reduce("argmax", x, {dim}, keepdim); }
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return reduce("var", x, dims, keepdim, {{"correction", correction}});
}
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce("logsumexp", x, dims, keepdim);
}

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return kiln::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::max(const std::vector<int64_t>& dims, bool keepdim) const { return kiln::max(*this, dims, keepdim); }
Tensor Tensor::min(const std::vector<int64_t>& dims, bool keepdim) const { return kiln::min(*this, dims, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return kiln::var(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return kiln::logsumexp(*this, dims, keepdim);
}

}  // namespace kiln
