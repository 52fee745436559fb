// bias_gelu's CUDA kernel compiled with nvcc by kiln_add_cuda_kernels (cmake/kiln_cuda_kernels.cmake):
// one thread an element, launched on the stream it is given (kiln's). Returns the launch's error
// text, or null.
#include <cuda_runtime.h>

namespace {

template <typename T>
__global__ void bias_gelu(const T* x, const T* b, T* y, long long n, long long cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  double z = double(x[i]) + double(b[i % cols]);
  y[i] = T(0.5 * z * (1.0 + erf(z * 0.7071067811865476)));
}

template <typename T>
const char* launch(const T* x, const T* b, T* y, long long n, long long cols, void* stream) {
  if (n == 0) return nullptr;
  bias_gelu<T><<<unsigned((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, b, y, n, cols);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

const char* launch_bias_gelu_f32(const float* x, const float* b, float* y, long long n, long long cols, void* stream) {
  return launch(x, b, y, n, cols, stream);
}

const char* launch_bias_gelu_f64(const double* x, const double* b, double* y, long long n, long long cols,
                                 void* stream) {
  return launch(x, b, y, n, cols, stream);
}
