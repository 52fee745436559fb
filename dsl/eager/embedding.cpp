// Eager runner of embedding: checks every index on the host (CUDA indices with
// KILN_CHECK_INDICES=1), then gathers rows with the kernel for
// the weight's element size (rows move as raw bits) and the index dtype. Canonical form: weight
// [V, D] with any strides, indices [N] (a contiguous copy when they are not), out dense [N, D].
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/index_checks.h"

namespace kiln {

namespace {

template <typename I>
void check_indices(const I* idx, int64_t n, const Shape& weight_shape, const Shape& indices_shape) {
  int64_t rows = weight_shape[0];
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(idx[i] >= 0 && idx[i] < rows, "embedding: index ", int64_t(idx[i]), " is out of range for a weight of ",
               rows, " rows (weight shape ", to_string(weight_shape), ", indices shape ", to_string(indices_shape),
               "); indices must lie in [0, ", rows, ")");
}

// Contiguous indices checked against a table of weight_shape[0] rows where they are checked on the
// host (dsl/index_checks.h); else the kernels clamp them.
void check_indices_on_host(const Tensor& indices, const Shape& weight_shape) {
  if (!indices_checked_on_host(indices.device())) return;
  Tensor host = indices.to(Device::cpu());
  if (host.dtype() == DType::i32)
    check_indices(static_cast<const int32_t*>(host.data_ptr()), host.numel(), weight_shape, indices.shape());
  else
    check_indices(static_cast<const int64_t*>(host.data_ptr()), host.numel(), weight_shape, indices.shape());
}

}  // namespace

TensorList run_embedding(const OpDef& def, const TensorList& in, const Attrs& attrs) {
  const Tensor& weight = in[0];
  TensorMeta om = def.infer({{weight.shape(), weight.dtype(), weight.device()},
                             {in[1].shape(), in[1].dtype(), in[1].device()}}, attrs)[0];
  Tensor indices = in[1].is_contiguous() ? in[1] : in[1].contiguous();
  int64_t n = indices.numel();
  check_indices_on_host(indices, weight.shape());
  Tensor out = Tensor::empty(om.shape, {om.dtype, om.device});
  if (out.numel() == 0) return {out};

  DType carrier = copy_carrier(weight.dtype());
  KernelFn fn = require_kernel("kiln_embedding_" + std::string(name(indices.dtype())) + "_" +
                               std::string(name(carrier)), def.name);
  Tensor w = Tensor::make_view(weight.storage(), weight.shape(), weight.strides(), weight.storage_offset(), carrier);
  Tensor o = Tensor::make_view(out.storage(), out.shape(), out.strides(), out.storage_offset(), carrier);
  int64_t d = weight.size(1);
  KernelBuffer bw(w, {d, weight.size(0)}, {weight.stride(1), weight.stride(0)});
  KernelBuffer bi(indices, {n}, {1});
  KernelBuffer bo(o, {d, n}, {1, d});
  call_kernel(fn, {&bw.buf, &bi.buf, &bo.buf}, def.name);
  return {out};
}

}  // namespace kiln

namespace kiln {

// embedding_backward: grad viewed as [N, D] (contiguous), indices as [N]; checked on the host.
TensorList run_embedding_backward(const OpDef& def, const TensorList& in, const Attrs& attrs) {
  TensorMeta om = def.infer({{in[0].shape(), in[0].dtype(), in[0].device()},
                             {in[1].shape(), in[1].dtype(), in[1].device()}}, attrs)[0];
  Tensor indices = in[1].contiguous();
  int64_t n = indices.numel(), d = om.shape[1];
  Shape table{om.shape[0], d};
  check_indices_on_host(indices, table);
  DType kt = kernel_dtype("kiln_embedding_backward_" + std::string(name(indices.dtype())), om.dtype);
  Tensor grad = convert(in[0], kt).contiguous();
  Tensor out = Tensor::empty(om.shape, {kt, om.device});
  if (out.numel() > 0) {
    KernelFn fn = require_kernel("kiln_embedding_backward_" + std::string(name(indices.dtype())) + "_" +
                                     std::string(name(kt)), def.name);
    KernelBuffer bg(grad, {d, n}, {1, d});
    KernelBuffer bi(indices, {n}, {1});
    KernelBuffer bo(out, {d, om.shape[0]}, {1, d});
    auto rows = int32_t(om.shape[0]);
    call_kernel(fn, {&bg.buf, &bi.buf, &rows, &bo.buf}, def.name);
  }
  return {convert(out, om.dtype)};
}

}  // namespace kiln
