#include "support/custom_ops.h"

#include <cmath>
#include <functional>

#include "dsl/creation.h"
#include "dsl/cuda/runtime_kernel.h"
#include "dsl/functions.h"

#ifdef KILN_TEST_NVCC
// bias_gelu.cu, compiled with nvcc.
const char* launch_bias_gelu_f32(const float* x, const float* b, float* y, long long n, long long cols, void* stream);
const char* launch_bias_gelu_f64(const double* x, const double* b, double* y, long long n, long long cols, void* stream);
#endif

namespace kiln::test {

namespace {

template <typename T>
void bias_gelu_rows(const T* x, const T* b, T* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double z = double(x[r * n + i]) + double(b[i]);
      out[r * n + i] = T(0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))));
    }
}

std::vector<TensorMeta> bias_gelu_shape(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta &x = in[0], &b = in[1];
  KILN_CHECK(b.shape.size() == 1 && !x.shape.empty() && x.shape.back() == b.shape[0], "kiln_test::bias_gelu: b ",
             to_string(b.shape), " must be [N] for x ", to_string(x.shape), " of last dim N");
  KILN_CHECK(x.dtype == b.dtype && (x.dtype == f32 || x.dtype == f64), "kiln_test::bias_gelu: x and b must both be "
             "f32 or f64, got ", name(x.dtype), " and ", name(b.dtype));
  return {x};
}

TensorList bias_gelu_cpu(const TensorList& in, const Attrs&) {
  const Tensor &x = in[0], &b = in[1];
  Tensor out = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  int64_t n = b.shape()[0], rows = n ? x.numel() / n : 0;
  if (x.dtype() == f64) bias_gelu_rows(x.data<double>(), b.data<double>(), out.data<double>(), rows, n);
  else bias_gelu_rows(x.data<float>(), b.data<float>(), out.data<float>(), rows, n);
  return {out};
}

// The CUDA kernel, compiled at run time with NVRTC: one thread an element. `tanh_form` uses
// GELU's tanh approximation instead of erf (the CUDA kernel that disagrees with the CPU's).
std::string bias_gelu_source(bool tanh_form) {
  std::string gelu = tanh_form ? "0.5 * z * (1.0 + tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)))"
                               : "0.5 * z * (1.0 + erf(z * 0.7071067811865476))";
  return R"(template <typename T> __device__ void run(const T* x, const T* b, T* y, long long n, long long cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  double z = double(x[i]) + double(b[i % cols]);
  y[i] = T()" + gelu + R"();
}
extern "C" __global__ void bias_gelu_f32(const float* x, const float* b, float* y, long long n, long long c) { run(x, b, y, n, c); }
extern "C" __global__ void bias_gelu_f64(const double* x, const double* b, double* y, long long n, long long c) { run(x, b, y, n, c); }
)";
}

CustomKernel bias_gelu_cuda(bool tanh_form) {
  auto f32_kernel = std::make_shared<RuntimeKernel>(bias_gelu_source(tanh_form), "bias_gelu_f32");
  auto f64_kernel = std::make_shared<RuntimeKernel>(bias_gelu_source(tanh_form), "bias_gelu_f64");
  return [f32_kernel, f64_kernel](const TensorList& in, const Attrs&) {
    const Tensor &x = in[0], &b = in[1];
    Tensor y = Tensor::empty(x.shape(), {x.dtype(), x.device()});
    int64_t n = x.numel(), cols = b.shape()[0];
    if (n > 0)
      (x.dtype() == f64 ? f64_kernel : f32_kernel)
          ->launch(x.device().index, {unsigned((n + 255) / 256)}, {256}, {x, b, y, n, cols});
    return TensorList{y};
  };
}

#ifdef KILN_TEST_NVCC
TensorList bias_gelu_nvcc_cuda(const TensorList& in, const Attrs&) {
  const Tensor &x = in[0], &b = in[1];
  Tensor y = Tensor::empty(x.shape(), {x.dtype(), x.device()});
  int64_t n = x.numel(), cols = b.shape()[0];
  void* stream = cuda_stream(x.device().index);
  const char* error =
      x.dtype() == f64
          ? launch_bias_gelu_f64(static_cast<const double*>(x.data_ptr()), static_cast<const double*>(b.data_ptr()),
                                 static_cast<double*>(y.data_ptr()), n, cols, stream)
          : launch_bias_gelu_f32(static_cast<const float*>(x.data_ptr()), static_cast<const float*>(b.data_ptr()),
                                 static_cast<float*>(y.data_ptr()), n, cols, stream);
  KILN_CHECK(!error, "kiln_test::bias_gelu_nvcc: the kernel's launch failed: ", error);
  return {y};
}
#endif

// d gelu(z) / dz = Phi(z) + z phi(z); `exp_term` false drops phi (the broken rule).
DerivativeRule bias_gelu_backward(bool exp_term) {
  return [exp_term](const TensorList& in, const TensorList&, const TensorList& grads, const Attrs&,
                    const std::vector<bool>& needed) -> TensorList {
    Tensor z = in[0] + in[1];
    Tensor d = (erf(z * (1.0 / std::sqrt(2.0))) + 1.0) * 0.5;
    if (exp_term) d = d + z * exp(z * z * -0.5) * (1.0 / std::sqrt(2.0 * M_PI));
    Tensor dz = grads[0] * d;
    Tensor db;
    if (needed[1]) {
      std::vector<int64_t> dims;
      for (int64_t k = 0; k + 1 < dz.dim(); ++k) dims.push_back(k);
      db = dims.empty() ? dz : sum(dz, dims);
    }
    return {needed[0] ? dz : Tensor(), db};
  };
}

CustomOp bias_gelu_spec(const char* name) {
  return {.name = name, .num_inputs = 2, .shape = bias_gelu_shape, .cpu = bias_gelu_cpu,
          .cuda = bias_gelu_cuda(false), .backward = bias_gelu_backward(true)};
}

// bias_gelu registered under `name` with `change` made to its registration (the broken variants).
const OpDef& variant(const char* name, const std::function<void(CustomOp&)>& change) {
  CustomOp c = bias_gelu_spec(name);
  change(c);
  return register_op(std::move(c));
}

// x[i] += b[i % n]: the write into its input of bias_gelu_writes_its_input's kernel.
template <typename T>
void add_rows_in_place(T* x, const T* b, int64_t numel, int64_t n) {
  for (int64_t i = 0; i < numel; ++i) x[i] += b[i % n];
}

}  // namespace

const OpDef& bias_gelu() {
  static const OpDef& op = register_op(bias_gelu_spec("kiln_test::bias_gelu"));
  return op;
}

#ifdef KILN_TEST_NVCC
const OpDef& bias_gelu_nvcc() {
  static const OpDef& op = variant("kiln_test::bias_gelu_nvcc", [](CustomOp& c) { c.cuda = bias_gelu_nvcc_cuda; });
  return op;
}
#endif

const OpDef& bias_gelu_wrong_shape_rule() {
  static const OpDef& op = variant("kiln_test::bias_gelu_wrong_shape_rule", [](CustomOp& c) {
    c.shape = [](const std::vector<TensorMeta>& in, const Attrs& a) {
      std::vector<TensorMeta> out = bias_gelu_shape(in, a);
      out[0].shape.back() += 1;
      return out;
    };
  });
  return op;
}

const OpDef& bias_gelu_wrong_gradient() {
  static const OpDef& op =
      variant("kiln_test::bias_gelu_wrong_gradient", [](CustomOp& c) { c.backward = bias_gelu_backward(false); });
  return op;
}

const OpDef& bias_gelu_writes_its_input() {
  static const OpDef& op = variant("kiln_test::bias_gelu_writes_its_input", [](CustomOp& c) {
    c.cpu = [](const TensorList& in, const Attrs& a) {
      const Tensor &x = in[0], &b = in[1];
      if (x.dtype() == f64) add_rows_in_place(x.data<double>(), b.data<double>(), x.numel(), b.numel());
      else add_rows_in_place(x.data<float>(), b.data<float>(), x.numel(), b.numel());
      return bias_gelu_cpu({x, zeros(b.shape(), {b.dtype(), b.device()})}, a);
    };
  });
  return op;
}

const OpDef& bias_gelu_cuda_disagrees() {
  static const OpDef& op =
      variant("kiln_test::bias_gelu_cuda_disagrees", [](CustomOp& c) { c.cuda = bias_gelu_cuda(true); });
  return op;
}

std::string bias_gelu_cuda_source() { return bias_gelu_source(false); }

}  // namespace kiln::test
