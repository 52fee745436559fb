// The shape and dtype rules the pointwise op tables share (op_tables.h). Compiled once, into
// kiln_defs_runtime.
#include "dsl/ops/op_tables.h"

namespace kiln {

DType result_type(const std::vector<TensorMeta>& in) {
  auto cat = [](DType t) { return t == DType::bool_ ? 0 : is_integral(t) ? 1 : 2; };
  bool have_dims = false, have_scalar = false;
  DType dims_t = DType::bool_, scalar_t = DType::bool_;
  for (const TensorMeta& m : in) {
    DType& acc = m.shape.empty() ? scalar_t : dims_t;
    bool& seen = m.shape.empty() ? have_scalar : have_dims;
    acc = seen ? promote_types(acc, m.dtype) : m.dtype;
    seen = true;
  }
  if (!have_dims) return scalar_t;
  if (!have_scalar || cat(scalar_t) <= cat(dims_t)) return dims_t;
  return is_floating(scalar_t) ? DType::f32 : scalar_t;  // int tensor with float scalar -> f32
}

Shape broadcast_all(std::string_view op, const std::vector<TensorMeta>& in) {
  Shape s = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) s = broadcast_shapes(op, s, in[i].shape);
  return s;
}

Device common_device(std::string_view op, const std::vector<TensorMeta>& in) {
  for (const TensorMeta& m : in)
    KILN_CHECK(m.device == in[0].device, op, ": tensors are on different devices (", in[0].device,
               " and ", m.device, "); move them with to(Device)");
  return in[0].device;
}

}  // namespace kiln
