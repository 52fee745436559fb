// Eager runners of softmax / log_softmax (family rows), layer_norm and cross_entropy. Each runs one
// kernel per (op, dtype[, variant]) over a 2-D strided view [row, rows] (Halide order: dim 0 runs
// along a row), like the reductions (dsl/eager/reduce.cpp):
//   rows:          the dims other than `dim` collapse into the rows dim, for the input and for the
//                  dense output alike; a group that does not collapse (a strided input, or `dim` in
//                  the middle of the output) goes through a permuted dense copy;
//   layer_norm:    [normalized numel, rows]; variant "affine" takes 1-D weight and bias (the public
//                  function supplies a missing one), "plain" none; eps is a kernel argument;
//   cross_entropy: logits [C, N] (rank-1 logits: N = 1) and targets [N], checked on the host to lie
//                  in [0, C) before the kernel runs; N = 0 gives nan, as a mean over nothing.
// f16, bf16 and integer inputs compute through the f32 kernels.
#include <limits>
#include <numeric>

#include "dsl/creation.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/eager/strided_view.h"
#include "dsl/error.h"

namespace kiln {

namespace {

std::vector<TensorMeta> metas_of(const TensorList& in) {
  std::vector<TensorMeta> m;
  for (const Tensor& t : in) m.push_back({t.shape(), t.dtype(), t.device()});
  return m;
}

// The 2-D [along, rows] description of t for a kernel buffer.
struct RowsView {
  StridedDim along, rows;
  bool ok() const { return along.ok && rows.ok; }
};

RowsView rows_view(const Tensor& t, const std::vector<int>& along, const std::vector<int>& rows) {
  return {collapse_dims(t, along), collapse_dims(t, rows)};
}

}  // namespace

TensorList run_rows(const OpDef& def, const TensorList& in, const Attrs& a) {
  const Tensor& input = in[0];
  TensorMeta om = def.infer(metas_of(in), a)[0];
  std::string prefix = "kiln_" + def.name;
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor out = Tensor::empty(input.shape(), {kt, input.device()});
  if (input.numel() == 0) return {convert(out, om.dtype)};

  Tensor x = convert(input, kt);
  int rank = int(x.dim());
  std::vector<int> along, rows;
  if (rank > 0) along.push_back(wrap_dim(def.name, a.get<int64_t>("dim"), rank));
  for (int d = 0; d < rank; ++d)
    if (along.empty() || d != along[0]) rows.push_back(d);
  // The fallback layout: rows outermost, `dim` innermost, dense.
  std::vector<int> order = rows, dense_rows(rows.size()), dense_along;
  order.insert(order.end(), along.begin(), along.end());
  std::iota(dense_rows.begin(), dense_rows.end(), 0);
  if (rank > 0) dense_along.push_back(rank - 1);

  RowsView vx = rows_view(x, along, rows), vo = rows_view(out, along, rows);
  if (!vx.ok()) {
    x = contiguous_copy(permuted(x, order));
    vx = rows_view(x, dense_along, dense_rows);
  }
  Tensor dst = out;
  if (!vo.ok()) {
    dst = Tensor::empty(permuted(out, order).shape(), out.options());
    vo = rows_view(dst, dense_along, dense_rows);
  }
  KernelBuffer bin(x, {vx.along.extent, vx.rows.extent}, {vx.along.stride, vx.rows.stride});
  KernelBuffer bout(dst, {vo.along.extent, vo.rows.extent}, {vo.along.stride, vo.rows.stride});
  call_kernel(fn, {&bin.buf, &bout.buf}, def.name);
  if (dst.storage() != out.storage()) copy_into(permuted(out, order), dst);
  return {convert(out, om.dtype)};
}

TensorList run_layer_norm(const OpDef& def, const TensorList& in, const Attrs& a) {
  TensorMeta om = def.infer(metas_of(in), a)[0];
  bool affine = in.size() == 3;
  std::string prefix = std::string("kiln_layer_norm_") + (affine ? "affine" : "plain");
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor out = Tensor::empty(in[0].shape(), {kt, in[0].device()});
  if (out.numel() == 0) return {convert(out, om.dtype)};

  Tensor x = convert(in[0], kt);
  int k = int(a.get<std::vector<int64_t>>("normalized_shape").size());
  std::vector<int> normalized, rows;
  for (int d = 0; d < x.dim(); ++d) (d < x.dim() - k ? rows : normalized).push_back(d);
  RowsView vx = rows_view(x, normalized, rows);
  if (!vx.ok()) {
    x = contiguous_copy(x);
    vx = rows_view(x, normalized, rows);
  }
  RowsView vo = rows_view(out, normalized, rows);
  KernelBuffer bin(x, {vx.along.extent, vx.rows.extent}, {vx.along.stride, vx.rows.stride});
  KernelBuffer bout(out, {vo.along.extent, vo.rows.extent}, {vo.along.stride, vo.rows.stride});
  std::vector<void*> args{&bin.buf};
  std::vector<Tensor> params;
  std::vector<std::unique_ptr<KernelBuffer>> param_bufs;
  if (affine) {
    for (int i : {1, 2}) {
      Tensor p = convert(in[i], kt);
      if (!p.is_contiguous()) p = contiguous_copy(p);
      params.push_back(p);
      param_bufs.push_back(std::make_unique<KernelBuffer>(p, std::vector<int64_t>{p.numel()},
                                                          std::vector<int64_t>{1}));
      args.push_back(&param_bufs.back()->buf);
    }
  }
  double eps = a.get<double>("eps");
  args.push_back(&eps);
  args.push_back(&bout.buf);
  call_kernel(fn, args, def.name);
  return {convert(out, om.dtype)};
}

TensorList run_cross_entropy(const OpDef& def, const TensorList& in, const Attrs& a) {
  TensorMeta om = def.infer(metas_of(in), a)[0];
  const Tensor &input = in[0], &targets = in[1];
  int64_t classes = input.size(-1), rows = input.dim() == 2 ? input.size(0) : 1;
  int64_t t_stride = targets.dim() == 1 ? targets.stride(0) : 0;
  // Device targets are not checked on the host (that would wait for the stream): the kernel clamps.
  const int64_t* t = input.device().is_cuda() ? nullptr : static_cast<const int64_t*>(targets.data_ptr());
  for (int64_t n = 0; t && n < rows; ++n) {
    int64_t c = t[n * t_stride];
    KILN_CHECK(c >= 0 && c < classes, "cross_entropy: target ", c, " at position ", n,
               " is out of range for ", classes, " classes (expected 0 <= target < ", classes, ")");
  }
  if (rows == 0) return {full({}, std::numeric_limits<double>::quiet_NaN(), {om.dtype, om.device})};

  std::string prefix = "kiln_cross_entropy";
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor x = convert(input, kt);
  Tensor out = Tensor::empty({}, {kt, input.device()});
  int64_t row_stride = x.dim() == 2 ? x.stride(0) : 0;
  KernelBuffer blogits(x, {classes, rows}, {x.stride(-1), row_stride});
  KernelBuffer btargets(targets, {rows}, {t_stride});
  KernelBuffer bout(out, {}, {});
  call_kernel(fn, {&blogits.buf, &btargets.buf, &bout.buf}, def.name);
  return {convert(out, om.dtype)};
}

}  // namespace kiln
