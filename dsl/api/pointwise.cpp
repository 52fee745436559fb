// The pointwise op functions.
#include "dsl/dispatch.h"
#include "dsl/functions.h"
#include "dsl/ops/unary_ops.h"

namespace kiln {

namespace {

Tensor call1(std::string_view op, const Tensor& x, const Attrs& a = {}) {
  return dispatch(op_def(op), {x}, a)[0];
}

}  // namespace

#define KILN_DEFINE_UNARY(fn, result, cheap, definition, derivative) \
  Tensor fn(const Tensor& x) { static const OpDef& d = op_def(#fn); return dispatch(d, {x})[0]; }
KILN_UNARY_OPS(KILN_DEFINE_UNARY)
KILN_DEFINE_UNARY(isfinite, , , , )
#undef KILN_DEFINE_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  return call1("gelu", x, {{"approximate", approximate}});
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  static const OpDef& d = op_def("gelu_backward");
  return dispatch(d, {grad, x}, {{"approximate", approximate}})[0];
}

#define KILN_BINARY(fn)                                \
  Tensor fn(const Tensor& a, const Tensor& b) {        \
    static const OpDef& d = op_def(#fn);               \
    return dispatch(d, {a, b})[0];                     \
  }
KILN_BINARY(add)
KILN_BINARY(sub)
KILN_BINARY(mul)
KILN_BINARY(div)
KILN_BINARY(pow)
KILN_BINARY(maximum)
KILN_BINARY(minimum)
KILN_BINARY(eq)
KILN_BINARY(ne)
KILN_BINARY(lt)
KILN_BINARY(le)
KILN_BINARY(gt)
KILN_BINARY(ge)
#undef KILN_BINARY

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  static const OpDef& d = op_def("where");
  return dispatch(d, {cond, a, b})[0];
}

Tensor scalar_like(double v, const Tensor& like) {
  static const OpDef& d = op_def("full");
  bool integral_value = v == double(int64_t(v));
  DType t = like.dtype();
  if (!is_floating(t)) t = integral_value ? (t == DType::bool_ ? DType::i64 : t) : DType::f32;
  Attrs a{{"shape", Shape{}}, {"value", v}, {"dtype", std::string(name(t))}, {"device", like.device().str()}};
  return dispatch(d, {}, a)[0];
}

Tensor cast(const Tensor& x, DType t) { return call1("cast", x, {{"dtype", std::string(name(t))}}); }

}  // namespace kiln
