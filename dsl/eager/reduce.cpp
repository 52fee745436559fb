// Eager runner of the reduction ops (sum, mean, max, min, argmax, var, logsumexp).
//
// Bounded variants: whatever the input's rank, layout and list of reduced dims, a reduction runs as
// one kernel per (op, dtype), over a 2-D strided view [reduced, kept] (Halide order: dim 0 is the
// reduced dim). The kept dims (kiln order) and the reduced dims (by decreasing stride; argmax keeps
// its one dim) each collapse into one strided dim when each dim steps over the whole next one;
// when either group does not, the input is copied with the reduced dims innermost (a permuted
// contiguous copy) and the view is dense. Dims of size 1 are skipped. The kernel writes a dense
// [kept] result, which is then seen with the output shape (keepdim or not). Inside each kernel,
// specialize() picks the schedule from the strides and sizes (generators/row_schedule.h), so the
// number of kernels stays (ops x dtypes) and small inputs stay on serial paths. On CUDA, sum and
// mean of rows laid out across memory (the kept dim dense) run the "columns" variant.
// Empty reductions never reach a kernel: sum gives 0, mean and var nan, logsumexp -inf (max, min
// and argmax were rejected by the shape rule).
#include <algorithm>
#include <cmath>
#include <limits>

#include "dsl/creation.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/strided_view.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"

namespace kiln {

namespace {

bool is_float_op(const std::string& op) { return op == "mean" || op == "var" || op == "logsumexp"; }

double empty_value(const std::string& op) {
  if (op == "sum") return 0;
  if (op == "logsumexp") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

TensorList run_reduce(const OpDef& def, const TensorList& in, const Attrs& a) {
  const Tensor& input = in[0];
  TensorMeta om = def.infer({{input.shape(), input.dtype(), input.device()}}, a)[0];
  std::vector<int> dims = wrap_dims(def.name, a.get<std::vector<int64_t>>("dims"), input.dim());
  std::string prefix = "kiln_" + def.name;
  DType kt = kernel_dtype(prefix, is_float_op(def.name) ? om.dtype : input.dtype());
  DType kout = def.name == "argmax" || (def.name == "sum" && is_integral(kt)) ? DType::i64 : kt;
  KernelFn fn = require_kernel(prefix + "_" + std::string(name(kt)), def.name);
  // CUDA only: the variant for rows laid out across memory (results adjacent), when it exists.
  KernelFn columns_fn = find_kernel(prefix + "_columns_" + std::string(name(kt)));

  std::vector<int> kept, reduced = dims;
  Shape kept_shape;
  int64_t rows = 1, length = 1;
  for (int d = 0; d < input.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      length *= input.size(d);
    } else {
      kept.push_back(d);
      kept_shape.push_back(input.size(d));
      rows *= input.size(d);
    }
  }
  Tensor out;
  if (rows == 0 || length == 0) {
    out = full(kept_shape, empty_value(def.name), {kout, input.device()});
  } else {
    Tensor x = convert(input, kt);
    if (def.name != "argmax")
      std::stable_sort(reduced.begin(), reduced.end(), [&](int p, int q) { return x.stride(p) > x.stride(q); });
    StridedDim r = collapse_dims(x, reduced), k = collapse_dims(x, kept);
    if (!r.ok || !k.ok) {
      std::vector<int> order = kept;
      order.insert(order.end(), reduced.begin(), reduced.end());
      x = contiguous_copy(permuted(x, order));
      r = {length, 1, true};
      k = {rows, length, true};
    }
    out = Tensor::empty(kept_shape, {kout, input.device()});
    if (columns_fn && k.stride == 1 && r.stride != 1 && rows > 1) fn = columns_fn;
    KernelBuffer bin(x, {r.extent, k.extent}, {r.stride, k.stride});
    KernelBuffer bout(out, {rows}, {1});
    int64_t correction = a.get_or<int64_t>("correction", 1);
    std::vector<void*> args{&bin.buf};
    if (def.name == "var") args.push_back(&correction);
    args.push_back(&bout.buf);
    call_kernel(fn, args, def.name);
  }
  Tensor shaped = Tensor::make_view(out.storage(), om.shape, contiguous_strides(om.shape), 0, out.dtype());
  return {convert(shaped, om.dtype)};
}

}  // namespace kiln
