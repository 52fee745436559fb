// Eager runners of the pointwise families (unary, binary, where, cast) and of copies and views.
#include "dsl/dispatch.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"

namespace kiln {

namespace {


// kiln_<op>, then the value of each string attribute (gelu's approximate, ...).
std::string kernel_prefix(const OpDef& def, const Attrs& a) {
  std::string p = "kiln_" + def.name;
  for (const auto& [k, v] : a.items())
    if (const std::string* s = std::get_if<std::string>(&v)) p += "_" + *s;
  return p;
}

Tensor reinterpret(const Tensor& x, DType t) {
  return Tensor::make_view(x.storage(), x.shape(), x.strides(), x.storage_offset(), t);
}

}  // namespace

DType copy_carrier(DType t) {
  switch (itemsize(t)) {
    case 1: return DType::bool_;
    case 2: return DType::f16;
    case 4: return DType::i32;
    default: return DType::i64;
  }
}

DType kernel_dtype(const std::string& prefix, DType t) {
  auto has = [&](DType d) { return find_kernel(prefix + "_" + std::string(name(d))) != nullptr; };
  if (has(t)) return t;
  DType wide = is_floating(t) ? DType::f32 : DType::i32;
  return has(wide) ? wide : t;
}

Tensor convert(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  return run_cast(op_def("cast"), {x}, Attrs{{"dtype", std::string(name(t))}})[0];
}

Tensor broadcast_to_view(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return Tensor::make_view(x.storage(), shape, broadcast_strides(x.shape(), x.strides(), shape),
                           x.storage_offset(), x.dtype());
}

TensorList run_pointwise(const OpDef& def, const TensorList& in, const Attrs& a) {
  std::vector<TensorMeta> metas = metas_of(in);
  TensorMeta om = def.infer(metas, a)[0];
  DType ct = def.compute_dtype ? def.compute_dtype(metas) : om.dtype;
  std::string prefix = kernel_prefix(def, a);
  DType kt = kernel_dtype(prefix, ct);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  DType kout = om.dtype == ct ? kt : om.dtype;

  TensorList args;
  for (size_t i = 0; i < in.size(); ++i) {
    bool cond = int(i) == def.condition_input;
    args.push_back(broadcast_to_view(cond ? in[i] : convert(in[i], kt), om.shape));
  }
  Tensor out = Tensor::empty(om.shape, {kout, om.device});
  run_pointwise_kernel(fn, args, out, def.name);
  return {convert(out, om.dtype)};
}

TensorList run_cast(const OpDef& def, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  DType to = def.infer(metas_of(in), a)[0].dtype;
  if (to == x.dtype()) return {x};
  KernelFn fn = require_kernel(kernel_prefix(def, a) + "_" + std::string(name(x.dtype())), def.name);
  Tensor out = Tensor::empty(x.shape(), {to, x.device()});
  run_pointwise_kernel(fn, {x}, out, def.name);
  return {out};
}

TensorList run_copy(const OpDef& def, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  Tensor out = Tensor::empty(x.shape(), x.options());
  DType carrier = copy_carrier(x.dtype());
  KernelFn fn = require_kernel("kiln_" + def.name + "_" + std::string(name(carrier)), def.name);
  run_pointwise_kernel(fn, {reinterpret(x, carrier)}, reinterpret(out, carrier), def.name);
  return {out};
}

void copy_into(const Tensor& dst, const Tensor& src) {
  KILN_CHECK(dst.dtype() == src.dtype(), "copy: dtypes differ (", dst.dtype(), " vs ", src.dtype(), ")");
  KILN_CHECK(dst.shape() == src.shape(), "copy: shapes differ (", to_string(dst.shape()), " vs ",
             to_string(src.shape()), ")");
  DType carrier = copy_carrier(src.dtype());
  KernelFn fn = require_kernel("kiln_contiguous_" + std::string(name(carrier)), "copy");
  run_pointwise_kernel(fn, {reinterpret(src, carrier)}, reinterpret(dst, carrier), "copy");
}

TensorList run_view(const OpDef& def, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  ViewMeta v = def.view.layout({x.shape(), x.strides(), x.storage_offset()}, a);
  return {Tensor::make_view(x.storage(), std::move(v.shape), std::move(v.strides), v.offset, x.dtype())};
}

}  // namespace kiln
