// Eager runner of matmul: turns any operands (1-D, 2-D, batched with broadcast batch dims, any
// strides: transposed views are never copied) into batched GEMMs a [B, M, K] x b [B, K, N] ->
// out [B, M, N], and runs each on the Halide kernels or on Eigen (dsl/eager/eigen_gemm.h).
// f16/bf16 compute through f32 and convert back. On CUDA every GEMM is cuBLAS's
// (dsl/eager/cublas_gemm.h), f16/bf16 included.
//
// Batch dims that all operands walk with one stride merge into one; when b is shared by every
// batch and a's rows continue across batches (linear on (B, T, C) inputs), the batch folds into
// M for one large GEMM. Batch dims that do not merge loop on the host.
//
// Which backend: Halide's tiled GEMM when it applies (M >= 8, N >= 32) and the problem has at
// least 64^3 multiply-adds per matrix and fits Halide's 32-bit indexing; Eigen otherwise (GEMV-like
// and tiny shapes). Measured on the 2-core AMD EPYC (Zen 5, AVX-512) build machine, f32, both
// cores, median of 21 runs after warm-up in one process, GFLOP/s Halide / Eigen:
//   1024^3 425 / 360; 1000^3 428 / 395; 512^3 484 / 445; 128x768 x 768x3072 417 / 389, with the
//   weight transposed (linear) 411 / 387; batched (16,128,64)x(16,64,128) 438 / 399; 64^3 186 /
//   149; 16x256x64 163 / 134; 8x512x512 212 / 222; 32^3 55 / 64; row kernel: 1x1024x1024 11 /
//   42, 1024x1024x16 30 / 271. f64: 1024^3 204 / 173, 64^3 130 / 84.
#include "dsl/eager/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "dsl/cuda/cuda_context.h"
#include "dsl/dispatch.h"
#include "dsl/eager/cublas_gemm.h"
#include "dsl/eager/eigen_gemm.h"
#include "dsl/eager/gemm_choice.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

namespace {

std::atomic<MatmulBackend> backend{MatmulBackend::automatic};

// The tiled Halide kernel needs M and N at least one register tile (the largest over targets).
constexpr int64_t kTileRows = 8, kTileCols = 32;
// Below this many multiply-adds per matrix Eigen's lower fixed cost wins.
constexpr int64_t kHalideMinMacs = 64 * 64 * 64;

struct Operand {
  int64_t rows = 1, cols = 1, row_stride = 0, col_stride = 0;
  Shape batch;
  Strides batch_strides;
};

// A 1-D a is one row; a 1-D b one column.
Operand matrix_view(const Shape& shape, const Strides& strides, bool is_a) {
  Operand o;
  size_t r = shape.size();
  if (r == 1) {
    (is_a ? o.cols : o.rows) = shape[0];
    (is_a ? o.col_stride : o.row_stride) = strides[0];
    return o;
  }
  o.rows = shape[r - 2], o.cols = shape[r - 1];
  o.row_stride = strides[r - 2], o.col_stride = strides[r - 1];
  o.batch.assign(shape.begin(), shape.end() - 2);
  o.batch_strides.assign(strides.begin(), strides.end() - 2);
  return o;
}

Operand matrix_view(const Tensor& t, bool is_a) { return matrix_view(t.shape(), t.strides(), is_a); }

// One batched GEMM per host iteration: extent/strides of the kernel's batch dim, and the host
// loop dims outside it (strides of a, b, out).
struct Plan {
  GemmProblem p;
  std::vector<int64_t> outer_extent;
  std::vector<std::array<int64_t, 3>> outer_stride;
};

Plan plan_gemm(const Operand& oa, const Operand& ob, const Shape& out_batch) {
  Plan plan;
  GemmProblem& p = plan.p;
  p.m = oa.rows, p.k = oa.cols, p.n = ob.cols;
  p.a = {0, oa.row_stride, oa.col_stride};
  p.b = {0, ob.row_stride, ob.col_stride};
  p.c = {p.m * p.n, p.n, 1};
  if (p.m == 1) p.a.row = 0;
  if (p.n == 1) p.b.col = 0;

  Strides sa = out_batch.empty() ? Strides{} : broadcast_strides(oa.batch, oa.batch_strides, out_batch);
  Strides sb = out_batch.empty() ? Strides{} : broadcast_strides(ob.batch, ob.batch_strides, out_batch);
  // Merged batch groups, innermost first: extent and strides of a, b, out.
  std::vector<int64_t> extent;
  std::vector<std::array<int64_t, 3>> stride;
  int64_t out_stride = p.m * p.n;
  for (size_t d = out_batch.size(); d-- > 0;) {
    int64_t e = out_batch[d];
    std::array<int64_t, 3> s{sa[d], sb[d], out_stride};
    out_stride *= e;
    if (e == 1) continue;
    if (!extent.empty() && s[0] == stride.back()[0] * extent.back() && s[1] == stride.back()[1] * extent.back() &&
        s[2] == stride.back()[2] * extent.back()) {
      extent.back() *= e;
    } else {
      extent.push_back(e);
      stride.push_back(s);
    }
  }
  if (extent.empty()) return plan;
  p.batch = extent[0];
  p.a.batch = stride[0][0], p.b.batch = stride[0][1], p.c.batch = stride[0][2];
  plan.outer_extent.assign(extent.begin() + 1, extent.end());
  plan.outer_stride.assign(stride.begin() + 1, stride.end());

  // b shared by all batches and a's rows continuing across them: one GEMM of batch * M rows.
  if (plan.outer_extent.empty() && p.b.batch == 0 && (p.m == 1 || p.a.batch == p.m * p.a.row)) {
    if (p.m == 1) p.a.row = p.a.batch;
    p.m *= p.batch;
    p.batch = 1;
    p.a.batch = p.c.batch = 0;
  }
  return plan;
}

// Halide kernels index with int32: every operand's span must stay below 2^31 elements.
bool fits_int32(const GemmProblem& p) {
  auto span = [&](const GemmStrides& s, int64_t rows, int64_t cols) {
    return std::abs(s.batch) * (p.batch - 1) + std::abs(s.row) * (rows - 1) + std::abs(s.col) * (cols - 1);
  };
  int64_t limit = std::numeric_limits<int32_t>::max();
  return span(p.a, p.m, p.k) < limit && span(p.b, p.k, p.n) < limit && span(p.c, p.m, p.n) < limit;
}

// Eigen for GEMV-like shapes and where Halide's indexing does not reach; for the rest the
// machine's measured choice (dsl/eager/gemm_choice.h), else the rule of the header comment: Eigen
// for problems too small to amortize Halide's tiling, Halide's tiled GEMM otherwise.
bool use_eigen(const GemmProblem& p) {
  switch (backend.load()) {
    case MatmulBackend::halide: return false;
    case MatmulBackend::eigen: return true;
    case MatmulBackend::automatic: break;
  }
  if (p.m < kTileRows || p.n < kTileCols || !fits_int32(p)) return true;
  int64_t macs = p.m * p.n * p.k;
  return machine_prefers_eigen(macs).value_or(macs < kHalideMinMacs);
}

void run_halide(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, int64_t oa,
                int64_t ob, int64_t oc) {
  bool tiled = p.m >= kTileRows && p.n >= kTileCols;
  std::string kernel = std::string("kiln_matmul_") + (tiled ? "tiled_" : "rows_") + std::string(name(out.dtype()));
  KernelFn fn = require_kernel(kernel, "matmul");
  KernelBuffer ba(a, {p.k, p.m, p.batch}, {p.a.col, p.a.row, p.a.batch}, oa);
  KernelBuffer bb(b, {p.n, p.k, p.batch}, {p.b.col, p.b.row, p.b.batch}, ob);
  KernelBuffer bc(out, {p.n, p.m, p.batch}, {1, p.n, p.m * p.n}, oc);
  call_kernel(fn, {&ba.buf, &bb.buf, &bc.buf}, "matmul");
}

template <typename T>
void run_eigen(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, int64_t oa,
               int64_t ob, int64_t oc) {
  const T* pa = static_cast<const T*>(a.data_ptr()) + oa;
  const T* pb = static_cast<const T*>(b.data_ptr()) + ob;
  T* pc = static_cast<T*>(out.data_ptr()) + oc;
  if constexpr (std::is_same_v<T, float>) {
    eigen_gemm_f32(pa, pb, pc, p);
  } else {
    eigen_gemm_f64(pa, pb, pc, p);
  }
}

// Calls gemm(offset of a, of b, of out) once per GEMM of the plan's host loops.
template <typename F>
void for_each_gemm(const Plan& plan, F&& gemm) {
  std::vector<int64_t> counter(plan.outer_extent.size(), 0);
  int64_t total = 1;
  for (int64_t e : plan.outer_extent) total *= e;
  for (int64_t it = 0; it < total; ++it) {
    int64_t off[3] = {0, 0, 0};
    for (size_t j = 0; j < counter.size(); ++j)
      for (int s = 0; s < 3; ++s) off[s] += counter[j] * plan.outer_stride[j][s];
    gemm(off[0], off[1], off[2]);
    for (size_t j = 0; j < counter.size() && ++counter[j] == plan.outer_extent[j]; ++j) counter[j] = 0;
  }
}

Shape batch_of(const Shape& out, size_t a_rank, size_t b_rank) {
  return Shape(out.begin(), out.begin() + std::max<int64_t>(0, int64_t(out.size()) - (a_rank >= 2) - (b_rank >= 2)));
}

Plan plan_gemm(const Tensor& a, const Tensor& b, const Shape& out_batch) {
  return plan_gemm(matrix_view(a, true), matrix_view(b, false), out_batch);
}

}  // namespace

// On CUDA every GEMM is queued on the stream, no waiting. Batch dims that do not merge into one
// stride (attention's heads split out of one projection: [B, T, H, D] viewed as [B, H, T, D]) run
// as one pointer-array batched call (cublas_gemm_each), so nothing is copied for them: on an H200,
// GPT-2 small's Q K^T ([96, 1024, 64] x [96, 64, 1024], TF32) took 128.8 us that way against
// 127.3 us strided-batched plus two 14 us copies to make q and k dense; one strided-batched call
// per batch element took 167 us. Only matrices neither row- nor column-major are copied.
namespace {

Plan plan_gemm(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape, const Strides& b_strides,
               const Shape& out_shape) {
  return plan_gemm(matrix_view(a_shape, a_strides, true), matrix_view(b_shape, b_strides, false),
                   batch_of(out_shape, a_shape.size(), b_shape.size()));
}

std::array<bool, 2> dense_copies(const Plan& plan) {
  return {!cublas_operand_ok(plan.p.a, plan.p.m, plan.p.k), !cublas_operand_ok(plan.p.b, plan.p.k, plan.p.n)};
}

// One matrix product (batch dims folded into rows): what cuBLASLt's bias epilogue takes.
bool one_matrix(const Plan& plan) { return plan.outer_extent.empty() && plan.p.batch == 1; }

}  // namespace

std::array<bool, 2> cublas_dense_copies(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                                        const Strides& b_strides, const Shape& out_shape) {
  return dense_copies(plan_gemm(a_shape, a_strides, b_shape, b_strides, out_shape));
}

bool cublas_bias_epilogue_applies(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                                  const Strides& b_strides, const Shape& out_shape) {
  Plan plan = plan_gemm(a_shape, a_strides, b_shape, b_strides, out_shape);
  std::array<bool, 2> copy = dense_copies(plan);
  return !copy[0] && !copy[1] && one_matrix(plan);
}

bool stored_by_columns(const Shape& shape, const Strides& strides) {
  size_t r = shape.size();
  return r >= 2 && strides[r - 2] == 1 && strides[r - 1] != 1 && shape[r - 2] > 1;
}

Tensor dense_copy(const Tensor& t) {
  if (!stored_by_columns(t.shape(), t.strides())) return t.contiguous();
  return t.transpose(-1, -2).contiguous().transpose(-1, -2);
}

namespace {

// The GEMM plan of a @ b -> out_shape on cuBLAS, the operands it cannot read in place first
// replaced by their dense copies (cublas_dense_copies).
Plan plan_cublas(Tensor& a, Tensor& b, const Shape& out_shape) {
  std::array<bool, 2> copy = cublas_dense_copies(a.shape(), a.strides(), b.shape(), b.strides(), out_shape);
  if (copy[0]) a = dense_copy(a);
  if (copy[1]) b = dense_copy(b);
  return plan_gemm(a, b, batch_of(out_shape, a.dim(), b.dim()));
}

// out = a @ b, and + bias along the rows in cuBLASLt's epilogue where the product is one matrix
// with a dense bias (a defined bias on [N]); returns whether the bias was added.
bool run_cublas(Tensor a, Tensor b, const Tensor& bias, const Tensor& out) {
  Plan plan = plan_cublas(a, b, out.shape());
  if (bias.defined() && bias.stride(0) == 1 && one_matrix(plan) &&
      cublas_gemm_epilogue(a, b, out, plan.p, GemmEpilogue::bias, bias, Tensor()))
    return true;
  if (plan.outer_extent.empty()) {
    cublas_gemm(a, b, out, plan.p, 0, 0, 0);
    return false;
  }
  std::vector<std::array<int64_t, 3>> offsets;
  for_each_gemm(plan, [&](int64_t oa, int64_t ob, int64_t oc) { offsets.push_back({oa, ob, oc}); });
  cublas_gemm_each(a, b, out, plan.p, offsets);
  return false;
}

// The GEMMs with GELU (tanh form) in cuBLASLt's epilogue: matmul_bias_gelu (a, b, bias ->
// gelu(a @ b + bias), and with aux = 1 also a @ b + bias) and matmul_gelu_backward (a, b, x ->
// (a @ b) * gelu'(x)). Where the epilogue does not apply (the CPU, a batch of products, a form
// cuBLASLt does not take) the product runs first and GELU's kernels after it.
TensorList run_gelu_gemm(const std::vector<TensorMeta>& om, const TensorList& in, bool backward) {
  const TensorMeta& m = om[0];
  const bool aux = om.size() > 1;
  if (m.device.is_cuda() && m.dtype != DType::f64) {
    Tensor a = in[0], b = in[1], x = in[2];
    Plan plan = plan_cublas(a, b, m.shape);
    if (one_matrix(plan) && (backward ? x.is_contiguous() : x.stride(0) == 1)) {
      Tensor out = Tensor::empty(m.shape, {m.dtype, m.device});
      Tensor pre = aux ? Tensor::empty(m.shape, {m.dtype, m.device}) : Tensor();
      bool done = backward ? cublas_gemm_epilogue(a, b, out, plan.p, GemmEpilogue::dgelu, Tensor(), x)
                           : cublas_gemm_epilogue(a, b, out, plan.p,
                                                  aux ? GemmEpilogue::bias_gelu_aux : GemmEpilogue::bias_gelu, x, pre);
      if (done) return aux ? TensorList{out, pre} : TensorList{out};
    }
  }
  if (backward) return {gelu_backward(matmul(in[0], in[1]), in[2], "tanh")};
  Tensor pre = add(matmul(in[0], in[1]), in[2]);
  Tensor out = gelu(pre, "tanh");
  return aux ? TensorList{out, pre} : TensorList{out};
}

// matmul_bias_grad (a, b -> a @ b, a summed along its last dim): on CUDA the sum in cuBLASLt's
// BGRADB epilogue where it applies; elsewhere the product, then a sum kernel.
TensorList run_bias_grad_gemm(const std::vector<TensorMeta>& om, const TensorList& in) {
  const TensorMeta& m = om[0];
  if (m.device.is_cuda() && m.dtype != DType::f64) {
    Tensor a = in[0], b = in[1];
    Plan plan = plan_cublas(a, b, m.shape);
    if (one_matrix(plan)) {
      Tensor out = Tensor::empty(m.shape, {m.dtype, m.device}), bias = Tensor::empty(om[1].shape, {m.dtype, m.device});
      if (cublas_gemm_epilogue(a, b, out, plan.p, GemmEpilogue::bgradb, bias, Tensor())) return {out, bias};
    }
  }
  return {matmul(in[0], in[1]), sum(in[0], {-1})};
}

}  // namespace

void set_matmul_backend(MatmulBackend b) { backend.store(b); }
MatmulBackend matmul_backend() { return backend.load(); }

bool eager_gemm_uses_eigen(int64_t m, int64_t k, int64_t n) {
  GemmProblem p{.batch = 1, .m = m, .n = n, .k = k, .a = {0, k, 1}, .b = {0, n, 1}, .c = {0, n, 1}};
  return use_eigen(p);
}

GemmChoice measure_gemm_choice() {
  GemmChoice choice;
  for (int64_t n : {32, 64, 128, 256, 512, 1024}) {
    // Operands from a fixed pattern, not the random generator: a measurement on first use must not
    // shift the user's random stream.
    Tensor a = Tensor::empty({n, n}), b = Tensor::empty({n, n}), out = Tensor::empty({n, n});
    for (const Tensor* t : {&a, &b}) {
      float* x = static_cast<float*>(t->data_ptr());
      for (int64_t i = 0; i < n * n; ++i) x[i] = float((i * 7919) % 199) / 99.0f - 1.0f;
    }
    Plan plan = plan_gemm(a, b, {});
    std::function<void()> runs[2] = {[&] { run_halide(a, b, out, plan.p, 0, 0, 0); },
                                     [&] { run_eigen<float>(a, b, out, plan.p, 0, 0, 0); }};
    // Calls per sample: enough for about a millisecond.
    auto seconds = [](const std::function<void()>& f, int calls) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) f();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (const auto& f : runs) seconds(f, 2);
    int calls = std::max(1, int(1e-3 / std::max(seconds(runs[0], 1), 1e-7)));
    // Samples of the two alternate, so that a machine slowing down for a while favours neither.
    std::vector<double> samples[2];
    for (int i = 0; i < 7; ++i)
      for (int k = 0; k < 2; ++k) samples[k].push_back(seconds(runs[k], calls) / calls);
    double gflops[2];
    for (int k = 0; k < 2; ++k) {
      std::sort(samples[k].begin(), samples[k].end());
      gflops[k] = 2.0 * double(n * n * n) / samples[k][3] * 1e-9;
    }
    choice.points.push_back({n, gflops[0], gflops[1]});
  }
  return choice;
}

// matmul, matmul_bias (a third input, bias [N], added to every row of the product), and the GEMMs
// with GELU and bias-gradient epilogues (run_gelu_gemm, run_bias_grad_gemm).
TensorList run_matmul(const OpDef& def, const TensorList& in, const Attrs& attrs) {
  std::vector<TensorMeta> oms = def.infer(metas_of(in), attrs);
  if (def.name == "matmul_bias_gelu" || def.name == "matmul_gelu_backward")
    return run_gelu_gemm(oms, in, def.name == "matmul_gelu_backward");
  if (def.name == "matmul_bias_grad") return run_bias_grad_gemm(oms, in);
  TensorMeta om = oms[0];
  const bool cuda = om.device.is_cuda();
  const Tensor bias = in.size() > 2 ? in[2] : Tensor();
  DType kt = om.dtype == DType::f64 || (cuda && (om.dtype == DType::f16 || om.dtype == DType::bf16))
                 ? om.dtype
                 : DType::f32;
  Tensor a = convert(in[0], kt), b = convert(in[1], kt);
  Tensor out = Tensor::empty(om.shape, {kt, om.device});
  if (out.numel() == 0) return {convert(out, om.dtype)};
  auto with_bias = [&](const Tensor& y) { return bias.defined() ? add(y, bias) : y; };
  if (a.shape().back() == 0) {  // K == 0: empty sums
    size_t nbytes = size_t(out.numel()) * itemsize(kt);
    uint8_t zero = 0;
    if (cuda) cuda_fill(reinterpret_cast<CUdeviceptr>(out.data_ptr()), &zero, 1, nbytes, om.device.index);
    else std::memset(out.data_ptr(), 0, nbytes);
    return {with_bias(convert(out, om.dtype))};
  }
  if (cuda) {  // every dtype computes in itself here (kt == om.dtype)
    bool added = run_cublas(a, b, bias, out);
    return {added ? out : with_bias(out)};
  }

  Plan plan = plan_gemm(a, b, batch_of(om.shape, a.dim(), b.dim()));
  bool eigen = use_eigen(plan.p);
  for_each_gemm(plan, [&](int64_t oa, int64_t ob, int64_t oc) {
    if (!eigen) run_halide(a, b, out, plan.p, oa, ob, oc);
    else if (kt == DType::f32) run_eigen<float>(a, b, out, plan.p, oa, ob, oc);
    else run_eigen<double>(a, b, out, plan.p, oa, ob, oc);
  });
  return {with_bias(convert(out, om.dtype))};
}

}  // namespace kiln
