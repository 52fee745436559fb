// The data-movement op functions: views, contiguous copies, cat and stack.
#include "dsl/dispatch.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

namespace {

Tensor view_call(std::string_view op, const Tensor& x, const Attrs& a) {
  return dispatch(op_def(op), {x}, a)[0];
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) { return view_call("view", x, {{"shape", shape}}); }

Tensor reshape(const Tensor& x, const Shape& shape) {
  try {
    return view(x, shape);
  } catch (const Error& e) {
    if (std::string(e.what()).find("without a copy") == std::string::npos) {
      // Element-count errors name the op the user called.
      std::string msg = e.what();
      throw Error("reshape" + msg.substr(msg.find(':')));
    }
    return view(contiguous(x), shape);
  }
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  Attrs a{{"start_dim", start_dim}, {"end_dim", end_dim}};
  try {
    return view_call("flatten", x, a);
  } catch (const Error& e) {
    if (std::string(e.what()).find("without a copy") == std::string::npos) throw;
    return view_call("flatten", contiguous(x), a);
  }
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  return view_call("unflatten", x, {{"dim", dim}, {"sizes", sizes}});
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return view_call("permute", x, {{"dims", dims}});
}
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return view_call("transpose", x, {{"dim0", d0}, {"dim1", d1}});
}
Tensor expand(const Tensor& x, const Shape& shape) { return view_call("expand", x, {{"shape", shape}}); }
Tensor squeeze(const Tensor& x) { return view_call("squeeze", x, {}); }
Tensor squeeze(const Tensor& x, int64_t dim) { return view_call("squeeze", x, {{"dim", dim}}); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return view_call("unsqueeze", x, {{"dim", dim}}); }
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return view_call("slice", x, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  int d = wrap_dim("narrow", dim, x.dim());
  int64_t n = x.impl().shape[d];  // a check only: reading it does not specialize a traced size
  KILN_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ",
             start + length, ") out of bounds for dim ", dim, " of size ", n);
  return slice(x, d, start, start + length);
}
Tensor contiguous(const Tensor& x) { return dispatch(op_def("contiguous"), {x})[0]; }

}  // namespace kiln
