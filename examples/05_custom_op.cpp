// Experiment 5: a custom operator. RMSNorm (y = x / sqrt(mean(x^2) + eps) * w over the last dim)
// registered as "examples::rms_norm" with a CPU kernel (plain loops), a CUDA kernel (CUDA source
// compiled at run time with NVRTC, a block a row) and a derivative rule written with Tensor ops;
// verified with check_op; used in a compiled training step (no graph break) that trains as the
// eager step does; and timed against the same math written with kiln's own ops, eagerly and
// compiled into kiln's generated kernel. Then the same RMSNorm with its pointwise half as a Halide
// op ("examples::scale_rows", x * r * w): kiln sees into its definition, so compiled it fuses with
// the row reduction into kiln's kernel, and its gradient comes from Halide's propagate_adjoints.
// Last, the whole RMSNorm as one Halide op over tensors ("examples::rms_norm_whole": its row sum
// of squares an RDom in the definition), compiled as a stage of its neighbours' pipeline
// (KILN_LOGS=fusion shows it), its gradient again from propagate_adjoints.
// On a machine without a GPU the CUDA parts say so and skip. Exits non-zero when a check fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "dsl/cuda/runtime_kernel.h"
#include "dsl/halide_def.h"
#include "kiln.h"

using namespace kiln;

namespace {

constexpr double kEps = 1e-6;

template <typename T>
void rms_norm_rows(const T* x, const T* w, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += double(xr[i]) * double(xr[i]);
    double inv = 1.0 / std::sqrt(s / double(cols) + kEps);
    for (int64_t i = 0; i < cols; ++i) y[r * cols + i] = T(double(xr[i]) * inv * double(w[i]));
  }
}

// A block of 256 threads a row: each sums the squares of its share, the block adds the 256
// partial sums in shared memory, then each writes its share.
const char* kCudaSource = R"(
template <typename T> __device__ void rms_rows(const T* x, const T* w, T* y, int cols, double eps) {
  __shared__ T partial[256];
  const T* xr = x + (long long)blockIdx.x * cols;
  T* yr = y + (long long)blockIdx.x * cols;
  T s = 0;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i] * xr[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  T inv = T(1) / sqrt(partial[0] / T(cols) + T(eps));
  for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}
extern "C" __global__ void rms_norm_f32(const float* x, const float* w, float* y, int cols, double eps) { rms_rows(x, w, y, cols, eps); }
extern "C" __global__ void rms_norm_f64(const double* x, const double* w, double* y, int cols, double eps) { rms_rows(x, w, y, cols, eps); }
)";

const OpDef& rms_norm_op() {
  static const RuntimeKernel f32_kernel(kCudaSource, "rms_norm_f32"), f64_kernel(kCudaSource, "rms_norm_f64");
  static const OpDef& op = register_op({
      .name = "examples::rms_norm",
      .num_inputs = 2,
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
        const TensorMeta &x = in[0], &w = in[1];
        KILN_CHECK(!x.shape.empty() && w.shape == Shape{x.shape.back()}, "examples::rms_norm: w ", to_string(w.shape),
                   " must be [C] for x ", to_string(x.shape));
        KILN_CHECK(x.dtype == w.dtype && (x.dtype == f32 || x.dtype == f64), "examples::rms_norm: f32 or f64 only");
        return std::vector<TensorMeta>{x};
      },
      .cpu = [](const TensorList& in, const Attrs&) {
        const Tensor &x = in[0], &w = in[1];
        Tensor y = Tensor::empty(x.shape(), {x.dtype(), x.device()});
        int64_t cols = w.shape()[0], rows = cols ? x.numel() / cols : 0;
        if (x.dtype() == f64) rms_norm_rows(x.data<double>(), w.data<double>(), y.data<double>(), rows, cols);
        else rms_norm_rows(x.data<float>(), w.data<float>(), y.data<float>(), rows, cols);
        return TensorList{y};
      },
      .cuda = [](const TensorList& in, const Attrs&) {
        const Tensor &x = in[0], &w = in[1];
        Tensor y = Tensor::empty(x.shape(), {x.dtype(), x.device()});
        int64_t cols = w.shape()[0], rows = cols ? x.numel() / cols : 0;
        if (rows > 0)
          (x.dtype() == f64 ? f64_kernel : f32_kernel)
              .launch(x.device().index, {unsigned(rows)}, {256}, {x, w, y, int32_t(cols), kEps});
        return TensorList{y};
      },
      // With r = 1 / sqrt(mean(x^2) + eps) and gw = g * w: dx = r gw - x r^3 mean(gw x), dw = sum of g x r.
      .backward = [](const TensorList& in, const TensorList&, const TensorList& grads, const Attrs&,
                     const std::vector<bool>& needed) {
        const Tensor &x = in[0], &w = in[1], &g = grads[0];
        Tensor r = 1.0 / sqrt(mean(x * x, {-1}, true) + kEps);
        Tensor dx, dw;
        if (needed[0]) {
          Tensor gw = g * w;
          dx = r * gw - x * (r * r * r) * mean(gw * x, {-1}, true);
        }
        if (needed[1]) {
          std::vector<int64_t> rows;
          for (int64_t d = 0; d + 1 < x.dim(); ++d) rows.push_back(d);
          dw = sum(g * x * r, rows);
        }
        return TensorList{dx, dw};
      }});
  return op;
}

Tensor rms_norm(const Tensor& x, const Tensor& w) { return call_op(rms_norm_op(), {x, w})[0]; }
// The same math in kiln's own ops, which compile() fuses into its own kernel.
Tensor rms_norm_in_kiln_ops(const Tensor& x, const Tensor& w) {
  return x * (1.0 / sqrt(mean(x * x, {-1}, true) + kEps)) * w;
}

// RMSNorm's pointwise half as a Halide op, x * r * w with r broadcast along the rows and w along
// the columns; no kernel and no derivative rule are written.
const OpDef& scale_rows_op() {
  static const OpDef& op = register_halide_op(
      {.name = "examples::scale_rows",
       .num_inputs = 3,
       .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) { return v[0] * v[1] * v[2]; }});
  return op;
}
Tensor rms_norm_halide(const Tensor& x, const Tensor& w) {
  return call_op(scale_rows_op(), {x, 1.0 / sqrt(mean(x * x, {-1}, true) + kEps), w})[0];
}

// The whole RMSNorm as a Halide op over tensors, x [R, C] and w [C]: the sum of squares of each
// row over an RDom, then the output. No kernel, no schedule and no derivative rule are written.
const OpDef& rms_norm_whole_op() {
  static const OpDef& op = register_halide_op(
      {.name = "examples::rms_norm_whole",
       .num_inputs = 2,
       .define = [](const std::vector<HalideTensor>& in, const Attrs&) {
         const HalideTensor &x = in[0], &w = in[1];
         const Halide::Type t = x.func.output_types()[0];
         Halide::Var i("i"), row("row");
         Halide::RDom k(0, x.dim(1), "k");
         Halide::Func squares("sum_of_squares");
         squares(row) = Halide::cast(t, 0);
         squares(row) += x.func(k, row) * x.func(k, row);
         Halide::Func y("rms_norm");
         y(i, row) = x.func(i, row) * w.func(i) / Halide::sqrt(squares(row) / Halide::cast(t, x.dim(1)) + Halide::cast(t, Halide::Expr(kEps)));
         return std::vector<HalideTensor>{{y, x.shape, x.dtype}};
       },
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
         KILN_CHECK(in[0].shape.size() == 2 && in[1].shape == Shape{in[0].shape[1]}, "examples::rms_norm_whole: x [R, C] and w [C], got ",
                    to_string(in[0]), " and ", to_string(in[1]));
         return std::vector<TensorMeta>{in[0]};
       }});
  return op;
}
Tensor rms_norm_whole(const Tensor& x, const Tensor& w) { return call_op(rms_norm_whole_op(), {x, w})[0]; }

// The Halide op's RMSNorm against the custom op's, values and gradients (the one's from
// propagate_adjoints, the other's from its hand-written rule), and check_op on the Halide op.
bool halide_op_agrees(Device d) {
  manual_seed(4);
  Tensor x = randn({32, 96}).to(d), w = randn({96}).to(d), g = randn({32, 96}).to(d);
  TensorList a = {x.detach().requires_grad_(), w.detach().requires_grad_()};
  TensorList b = {x.detach().requires_grad_(), w.detach().requires_grad_()};
  Tensor ya = rms_norm_halide(a[0], a[1]), yb = rms_norm(b[0], b[1]);
  (ya * g).sum().backward();
  (yb * g).sum().backward();
  auto max_diff = [](const Tensor& p, const Tensor& q) { return max(abs(p - q)).item<double>(); };
  double dy = max_diff(ya, yb), dx = max_diff(a[0].grad(), b[0].grad()), dw = max_diff(a[1].grad(), b[1].grad());
  OpCheckReport r = check_op(scale_rows_op(), {{.inputs = {x, randn({32, 1}).to(d), w}}});
  std::printf("Halide op on %s: |y - custom op's y| %.2e, |dx - custom's dx| %.2e, |dw - custom's dw| %.2e; check_op: %s",
              d.is_cuda() ? "cuda" : "cpu", dy, dx, dw, r.text().c_str());
  bool ok = r.ok() && dy < 1e-4 && dx < 1e-3 && dw < 1e-3;
  // The whole RMSNorm as one Halide op over tensors, against the custom op too.
  TensorList c = {x.detach().requires_grad_(), w.detach().requires_grad_()};
  Tensor yc = rms_norm_whole(c[0], c[1]);
  (yc * g).sum().backward();
  dy = max_diff(yc, yb), dx = max_diff(c[0].grad(), b[0].grad()), dw = max_diff(c[1].grad(), b[1].grad());
  OpCheckReport whole = check_op(rms_norm_whole_op(), {{.inputs = {x, w}}});
  std::printf("Halide op over tensors on %s: |y - custom op's y| %.2e, |dx - custom's dx| %.2e, |dw - custom's dw| %.2e; "
              "check_op: %s", d.is_cuda() ? "cuda" : "cpu", dy, dx, dw, whole.text().c_str());
  return ok && whole.ok() && dy < 1e-4 && dx < 1e-3 && dw < 1e-3;
}

// The op over tensors compiled between a producer and a consumer: one region (KILN_LOGS=fusion).
void show_fusion() {
  manual_seed(5);
  Tensor x = randn({8, 64}), w = randn({64});
  auto f = compile([](Tensor a, Tensor b) { return rms_norm_whole(a * 2.0, b) + 1.0; },
                   {.backend = "halide", .fullgraph = true, .name = "rms_norm_whole chain"});
  set_logs("fusion");
  f(x, w);
  set_logs("");
  std::printf("rms_norm_whole between a producer and a consumer: %d compiled kernel(s)\n", f.stats().kernels);
}

// Median milliseconds of `fn` after warm-up, the device drained around each call.
template <typename F>
double median_ms(Device d, F&& fn, int runs = 20) {
  auto sync = [&] {
    if (d.is_cuda()) cuda_synchronize(d.index);
  };
  for (int i = 0; i < 3; ++i) fn();
  sync();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    sync();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

bool check(const char* what, const std::vector<OpSample>& samples) {
  OpCheckReport r = check_op(rms_norm_op(), samples);
  std::printf("check_op %s: %s", what, r.text().c_str());
  for (const std::string& s : r.skipped) std::printf("  skipped %s\n", s.c_str());
  return r.ok();
}

// Three steps of a small model (linear, rms_norm, linear, mean square loss), eagerly and compiled.
bool trains_as_eagerly(Device d) {
  auto params = [&] {
    manual_seed(1);
    TensorList p = {(randn({32, 64}) * 0.2).to(d), ones({64}).to(d), (randn({64, 16}) * 0.2).to(d)};
    for (Tensor& t : p) t.requires_grad_();
    return p;
  };
  TensorList eager_p = params(), comp_p = params();
  optim::SGD eager_opt(eager_p, {.lr = 0.1}), comp_opt(comp_p, {.lr = 0.1});
  manual_seed(2);
  Tensor x = randn({128, 32}).to(d), t = randn({128, 16}).to(d);
  auto step = [](TensorList& p, optim::SGD& opt, const Tensor& a, const Tensor& target) {
    Tensor y = matmul(rms_norm(matmul(a, p[0]), p[1]), p[2]);
    Tensor loss = ((y - target) * (y - target)).mean();
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
  auto compiled = compile([&](Tensor a, Tensor target) { return step(comp_p, comp_opt, a, target); },
                          {.backend = "halide", .fullgraph = true, .name = "rms_norm step"});
  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    double want = step(eager_p, eager_opt, x, t).item<double>(), got = compiled(x, t).item<double>();
    std::printf("step %d on %s: loss eager %.6f, compiled %.6f\n", i, d.is_cuda() ? "cuda" : "cpu", want, got);
    ok = ok && std::abs(want - got) <= 1e-4 * std::abs(want) + 1e-6;
  }
  std::printf("graph breaks: %zu\n", explain(compiled, x, t).breaks.size());
  return ok;
}

void timing(Device d, int64_t rows, int64_t cols) {
  manual_seed(3);
  Tensor x = randn({rows, cols}).to(d), w = randn({cols}).to(d);
  NoGradGuard no_grad;
  auto kiln_compiled = compile([](Tensor a, Tensor b) { return rms_norm_in_kiln_ops(a, b); }, {.backend = "halide"});
  auto custom_compiled = compile([](Tensor a, Tensor b) { return rms_norm(a, b); }, {.backend = "halide"});
  auto halide_compiled = compile([](Tensor a, Tensor b) { return rms_norm_halide(a, b); }, {.backend = "halide"});
  double bytes = double(2 * rows * cols + cols) * 4;
  std::printf("\nRMSNorm [%lld, %lld] f32 on %s, median of 20 after warm-up:\n", (long long)rows, (long long)cols,
              d.is_cuda() ? "cuda" : "cpu");
  std::printf("| variant | ms | GB/s |\n| --- | --- | --- |\n");
  auto row = [&](const char* name, double ms) { std::printf("| %s | %.4f | %.1f |\n", name, ms, bytes / ms / 1e6); };
  row("custom op, eager (its own kernel)", median_ms(d, [&] { rms_norm(x, w); }));
  row("custom op, compiled (a step between pipelines)", median_ms(d, [&] { custom_compiled(x, w); }));
  row("kiln ops, eager", median_ms(d, [&] { rms_norm_in_kiln_ops(x, w); }));
  row("kiln ops, compiled (kiln's generated kernel)", median_ms(d, [&] { kiln_compiled(x, w); }));
  row("Halide op with kiln's reduction, eager", median_ms(d, [&] { rms_norm_halide(x, w); }));
  row("Halide op with kiln's reduction, compiled (fused)", median_ms(d, [&] { halide_compiled(x, w); }));
  auto whole_compiled = compile([](Tensor a, Tensor b) { return rms_norm_whole(a, b); }, {.backend = "halide"});
  row("Halide op over tensors, eager", median_ms(d, [&] { rms_norm_whole(x, w); }));
  row("Halide op over tensors, compiled", median_ms(d, [&] { whole_compiled(x, w); }));
}

}  // namespace

int main() {
  manual_seed(0);
  bool ok = check("on the CPU", {{.inputs = {randn({16, 64}), randn({64})}},
                                 {.inputs = {randn({3, 4, 32}, {.dtype = f64}), randn({32}, {.dtype = f64})}}});
  ok = trains_as_eagerly(Device::cpu()) && ok;
  ok = halide_op_agrees(Device::cpu()) && ok;
  show_fusion();
  if (!cuda_available()) {
    std::printf("CUDA parts skipped: %s\n", cuda_unavailable_reason().c_str());
  } else {
    Device g = Device::cuda();
    ok = check("on CUDA", {{.inputs = {randn({16, 300}).to(g), randn({300}).to(g)}},
                           {.inputs = {randn({5, 96}, {.dtype = f64}).to(g), randn({96}, {.dtype = f64}).to(g)}}}) && ok;
    ok = trains_as_eagerly(g) && ok;
    ok = halide_op_agrees(g) && ok;
    timing(g, 8192, 4096);
  }
  timing(Device::cpu(), 1024, 1024);
  std::printf("%s\n", ok ? "all checks passed" : "A CHECK FAILED");
  return ok ? 0 : 1;
}
