// Eager runners of softmax / log_softmax and their backward ops (family rows), layer_norm (and its
// backward) and cross_entropy (and its backward). Each runs one
// kernel per (op, dtype[, variant]) over a 2-D strided view [row, rows] (Halide order: dim 0 runs
// along a row), like the reductions (dsl/eager/reduce.cpp):
//   rows:          the dims other than `dim` collapse into the rows dim, for the input and for the
//                  dense output alike; a group that does not collapse (a strided input, or `dim` in
//                  the middle of the output) goes through a permuted dense copy;
//   layer_norm:    [normalized numel, rows]; variant "affine" takes 1-D weight and bias (the public
//                  function supplies a missing one), "plain" none; eps is a kernel argument;
//   cross_entropy: logits [C, N] (rank-1 logits: N = 1) and targets [N], checked on the host to lie
//                  in [0, C) before the kernel runs, -> the loss and each row's log-sum-exp [N];
//                  N = 0 gives nan, as a mean over nothing.
// f16, bf16 and integer inputs compute through the f32 kernels.
#include <limits>
#include <memory>
#include <numeric>

#include "dsl/creation.h"
#include "dsl/dispatch.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/eager/strided_view.h"
#include "dsl/error.h"
#include "dsl/index_checks.h"

namespace kiln {

namespace {


// The 2-D [along, rows] description of t for a kernel buffer.
struct RowsView {
  StridedDim along, rows;
  bool ok() const { return along.ok && rows.ok; }
};

RowsView rows_view(const Tensor& t, const std::vector<int>& along, const std::vector<int>& rows) {
  return {collapse_dims(t, along), collapse_dims(t, rows)};
}

// On CUDA, rows up to this long whose elements are adjacent run the "warp" kernels (a warp per
// row) where they exist; longer rows keep a block of threads per row (the compiled schedule's
// threshold, schedules/gpu_schedule.cpp).
constexpr int64_t kWarpRowMax = 1024;

// The warp kernel `prefix`_warp_`dtype` when the views suit it and it was built, else `fn`.
KernelFn warp_kernel_or(KernelFn fn, const std::string& prefix, DType t, const std::vector<RowsView>& views) {
  if (views.empty() || views[0].along.extent > kWarpRowMax) return fn;
  for (const RowsView& v : views)
    if (v.along.stride != 1 && v.along.extent > 1) return fn;
  KernelFn warp = find_kernel(prefix + "_warp_" + std::string(name(t)));
  return warp ? warp : fn;
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

  int rank = int(input.dim());
  std::vector<int> along, rows;
  if (rank > 0) along.push_back(wrap_dim(def.name, a.get<int64_t>("dim"), rank));
  for (int d = 0; d < rank; ++d)
    if (along.empty() || d != along[0]) rows.push_back(d);
  // The fallback layout: rows outermost, `dim` innermost, dense.
  std::vector<int> order = rows, dense_rows(rows.size()), dense_along;
  order.insert(order.end(), along.begin(), along.end());
  std::iota(dense_rows.begin(), dense_rows.end(), 0);
  if (rank > 0) dense_along.push_back(rank - 1);

  TensorList xs;  // each input (the backward ops: y and dy) in the kernel's dtype and a 2-D view
  std::vector<RowsView> views;
  std::vector<std::unique_ptr<KernelBuffer>> bufs;
  std::vector<void*> args;
  for (const Tensor& t : in) {
    Tensor x = convert(t, kt);
    RowsView vx = rows_view(x, along, rows);
    if (!vx.ok()) {
      x = contiguous_copy(permuted(x, order));
      vx = rows_view(x, dense_along, dense_rows);
    }
    xs.push_back(x);
    views.push_back(vx);
    bufs.push_back(std::make_unique<KernelBuffer>(x, std::vector<int64_t>{vx.along.extent, vx.rows.extent},
                                                  std::vector<int64_t>{vx.along.stride, vx.rows.stride}));
    args.push_back(&bufs.back()->buf);
  }
  RowsView vo = rows_view(out, along, rows);
  Tensor dst = out;
  if (!vo.ok()) {
    dst = Tensor::empty(permuted(out, order).shape(), out.options());
    vo = rows_view(dst, dense_along, dense_rows);
  }
  KernelBuffer bout(dst, {vo.along.extent, vo.rows.extent}, {vo.along.stride, vo.rows.stride});
  args.push_back(&bout.buf);
  views.push_back(vo);
  call_kernel(warp_kernel_or(fn, prefix, kt, views), args, def.name);
  if (dst.storage() != out.storage()) copy_into(permuted(out, order), dst);
  return {convert(out, om.dtype)};
}

TensorList run_layer_norm(const OpDef& def, const TensorList& in, const Attrs& a) {
  TensorMeta om = def.infer(metas_of(in), a)[0];
  const bool backward = def.name == "layer_norm_backward";
  const size_t rows_inputs = backward ? 2 : 1;  // x, and dy for the backward; then weight (and bias)
  bool affine = in.size() > rows_inputs;
  std::string prefix = "kiln_" + def.name + (affine ? "_affine" : "_plain");
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor out = Tensor::empty(in[0].shape(), {kt, in[0].device()});
  if (out.numel() == 0) return {convert(out, om.dtype)};

  int k = int(a.get<std::vector<int64_t>>("normalized_shape").size());
  int rank = int(in[0].dim());
  std::vector<int> normalized, rows;
  for (int d = 0; d < rank; ++d) (d < rank - k ? rows : normalized).push_back(d);
  std::vector<void*> args;
  std::vector<Tensor> params;
  std::vector<RowsView> views;
  std::vector<std::unique_ptr<KernelBuffer>> param_bufs;
  for (size_t i = 0; i < rows_inputs; ++i) {
    Tensor x = convert(in[i], kt);
    RowsView vx = rows_view(x, normalized, rows);
    if (!vx.ok()) {
      x = contiguous_copy(x);
      vx = rows_view(x, normalized, rows);
    }
    params.push_back(x);
    views.push_back(vx);
    param_bufs.push_back(std::make_unique<KernelBuffer>(x, std::vector<int64_t>{vx.along.extent, vx.rows.extent},
                                                        std::vector<int64_t>{vx.along.stride, vx.rows.stride}));
    args.push_back(&param_bufs.back()->buf);
  }
  RowsView vo = rows_view(out, normalized, rows);
  KernelBuffer bout(out, {vo.along.extent, vo.rows.extent}, {vo.along.stride, vo.rows.stride});
  if (affine) {
    for (size_t i = rows_inputs; i < in.size(); ++i) {
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
  views.push_back(vo);
  call_kernel(warp_kernel_or(fn, prefix, kt, views), args, def.name);
  return {convert(out, om.dtype)};
}

// cross_entropy_backward: [C, N] logits and gradient, the targets, the forward's [N] log-sum-exp,
// the 0-d loss gradient. Its targets are not checked: one outside [0, C) picks no class, as the
// composite's one_hot does.
TensorList run_cross_entropy_backward(const OpDef& def, const TensorList& in, const Attrs& a) {
  TensorMeta om = def.infer(metas_of(in), a)[0];
  const Tensor &input = in[0], &targets = in[1];
  int64_t classes = input.size(-1), rows = input.dim() == 2 ? input.size(0) : 1;
  std::string prefix = "kiln_cross_entropy_backward";
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor out = Tensor::empty(input.shape(), {kt, input.device()});
  if (out.numel() == 0) return {convert(out, om.dtype)};
  Tensor x = convert(input, kt), lse = convert(in[2], kt), g = convert(in[3], kt);
  int64_t row_stride = x.dim() == 2 ? x.stride(0) : 0, t_stride = targets.dim() == 1 ? targets.stride(0) : 0;
  KernelBuffer blogits(x, {classes, rows}, {x.stride(-1), row_stride});
  KernelBuffer btargets(targets, {rows}, {t_stride});
  KernelBuffer blse(lse, {rows}, {lse.dim() == 1 ? lse.stride(0) : 0});
  KernelBuffer bgrad(g, {}, {});
  KernelBuffer bout(out, {classes, rows}, {1, out.dim() == 2 ? classes : 0});
  call_kernel(fn, {&blogits.buf, &btargets.buf, &blse.buf, &bgrad.buf, &bout.buf}, def.name);
  return {convert(out, om.dtype)};
}

TensorList run_cross_entropy(const OpDef& def, const TensorList& in, const Attrs& a) {
  if (def.name == "cross_entropy_backward") return run_cross_entropy_backward(def, in, a);
  TensorMeta om = def.infer(metas_of(in), a)[0];
  const Tensor &input = in[0], &targets = in[1];
  int64_t classes = input.size(-1), rows = input.dim() == 2 ? input.size(0) : 1;
  int64_t t_stride = targets.dim() == 1 ? targets.stride(0) : 0;
  // Targets are checked where dsl/index_checks.h says; otherwise the kernel clamps them.
  Tensor host_targets;
  if (indices_checked_on_host(input.device())) host_targets = targets.to(Device::cpu());
  const int64_t* t = host_targets.defined() ? static_cast<const int64_t*>(host_targets.data_ptr()) : nullptr;
  int64_t host_stride = host_targets.defined() && host_targets.dim() == 1 ? host_targets.stride(0) : 0;
  for (int64_t n = 0; t && n < rows; ++n) {
    int64_t c = t[n * host_stride];
    KILN_CHECK(c >= 0 && c < classes, "cross_entropy: target ", c, " at position ", n,
               " is out of range for ", classes, " classes (expected 0 <= target < ", classes, ")");
  }
  TensorMeta lm = def.infer(metas_of(in), a)[1];
  if (rows == 0)
    return {full({}, std::numeric_limits<double>::quiet_NaN(), {om.dtype, om.device}), Tensor::empty(lm.shape, {lm.dtype, lm.device})};

  std::string prefix = "kiln_cross_entropy";
  DType kt = kernel_dtype(prefix, om.dtype);
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  Tensor x = convert(input, kt);
  Tensor out = Tensor::empty({}, {kt, input.device()}), lse = Tensor::empty(lm.shape, {kt, input.device()});
  int64_t row_stride = x.dim() == 2 ? x.stride(0) : 0;
  KernelBuffer blogits(x, {classes, rows}, {x.stride(-1), row_stride});
  KernelBuffer btargets(targets, {rows}, {t_stride});
  KernelBuffer bout(out, {}, {});
  KernelBuffer blse(lse, {rows}, {1});
  call_kernel(fn, {&blogits.buf, &btargets.buf, &bout.buf, &blse.buf}, def.name);
  return {convert(out, om.dtype), convert(lse, lm.dtype)};
}

}  // namespace kiln
