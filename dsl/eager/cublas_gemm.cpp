#include "dsl/eager/cublas_gemm.h"

#include <algorithm>
#include <atomic>
#include <climits>

#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"
#include "dsl/tensor.h"

namespace kiln {

namespace {

std::atomic<Float32MatmulPrecision> precision{Float32MatmulPrecision::highest};

// A row-major matrix (rows x cols) with strides s, seen by column-major cuBLAS as its transpose:
// unit column stride -> op N with ld = row stride; unit row stride -> op T with ld = col stride.
struct CublasOperand {
  int op = kCublasOpN;
  int64_t ld = 1;
};

bool as_operand(const GemmStrides& s, int64_t rows, int64_t cols, CublasOperand& o) {
  if ((s.col == 1 || cols == 1) && s.row >= std::max<int64_t>(cols, 1)) {
    o = {kCublasOpN, s.row};
    return true;
  }
  if ((s.row == 1 || rows == 1) && s.col >= std::max<int64_t>(rows, 1)) {
    o = {kCublasOpT, s.col};
    return true;
  }
  if (rows == 1 && s.col == 1) {  // one row, dense: any ld >= cols works
    o = {kCublasOpN, std::max<int64_t>(cols, 1)};
    return true;
  }
  return false;
}

int cuda_type(DType t) {
  switch (t) {
    case DType::f32: return kCudaR32F;
    case DType::f64: return kCudaR64F;
    case DType::f16: return kCudaR16F;
    case DType::bf16: return kCudaR16BF;
    default: throw_error("matmul: cuBLAS has no ", t, " GEMM (use a floating dtype)");
  }
}

}  // namespace

void set_float32_matmul_precision(Float32MatmulPrecision p) { precision.store(p); }
Float32MatmulPrecision float32_matmul_precision() { return precision.load(); }

bool cublas_operand_ok(const GemmStrides& s, int64_t rows, int64_t cols) {
  CublasOperand o;
  return as_operand(s, rows, cols, o);
}

namespace {

// What every cuBLAS call of one problem shares: operand forms, types, compute type, scalars.
struct CublasCall {
  CublasOperand a, b;  // cuBLAS computes C^T (n x m) = B^T (n x k) * A^T (k x m)
  int type = kCudaR32F, compute = kCublasCompute32F;
  size_t element = 4;
  float alpha32 = 1, beta32 = 0;
  double alpha64 = 1, beta64 = 0;
  const void* alpha() const { return element == 8 ? static_cast<const void*>(&alpha64) : &alpha32; }
  const void* beta() const { return element == 8 ? static_cast<const void*>(&beta64) : &beta32; }
};

CublasCall prepare(const Tensor& out, const GemmProblem& p) {
  KILN_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX && p.batch <= INT_MAX, "matmul: sizes m=", p.m,
             " n=", p.n, " k=", p.k, " exceed cuBLAS's 32-bit sizes");
  CublasCall c;
  KILN_CHECK(as_operand(p.b, p.k, p.n, c.b) && as_operand(p.a, p.m, p.k, c.a),
             "matmul: internal: an operand is neither row- nor column-major");
  DType t = out.dtype();
  c.type = cuda_type(t);
  c.compute = t == DType::f64 ? kCublasCompute64F
              : t == DType::f32 && float32_matmul_precision() == Float32MatmulPrecision::high
                  ? kCublasCompute32FFastTf32
                  : kCublasCompute32F;
  c.element = itemsize(t);
  return c;
}

}  // namespace

void cublas_gemm(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, int64_t oa,
                 int64_t ob, int64_t oc) {
  CublasCall c = prepare(out, p);
  CudaContext& ctx = cuda_context(out.device().index);
  const CudaApi& api = cuda_api_with_cublas();
  int64_t es = int64_t(c.element);
  const char* pa = static_cast<const char*>(a.data_ptr()) + oa * es;
  const char* pb = static_cast<const char*>(b.data_ptr()) + ob * es;
  char* pc = static_cast<char*>(out.data_ptr()) + oc * es;
  check_cublas(api.cublasGemmStridedBatchedEx(ctx.cublas(), c.b.op, c.a.op, int(p.n), int(p.m), int(p.k), c.alpha(),
                                              pb, c.type, int(c.b.ld), p.b.batch, pa, c.type, int(c.a.ld),
                                              p.a.batch, c.beta(), pc, c.type, int(p.c.row), p.c.batch,
                                              int(p.batch), c.compute, kCublasGemmDefault),
               "matmul (cuBLAS)");
}

void cublas_gemm_each(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p,
                      const std::vector<std::array<int64_t, 3>>& offsets) {
  CublasCall c = prepare(out, p);
  CudaContext& ctx = cuda_context(out.device().index);
  const CudaApi& api = cuda_api_with_cublas();
  const int64_t es = int64_t(c.element);
  const char* base[3] = {static_cast<const char*>(a.data_ptr()), static_cast<const char*>(b.data_ptr()),
                         static_cast<const char*>(out.data_ptr())};
  const int64_t batch_stride[3] = {p.a.batch, p.b.batch, p.c.batch};
  // One call per chunk of problems whose three pointer arrays fit one upload.
  const size_t per_call = kArgumentSlotBytes / (3 * sizeof(void*));
  std::vector<const void*> ptrs;
  size_t total = offsets.size() * size_t(p.batch);
  for (size_t first = 0; first < total; first += per_call) {
    size_t count = std::min(per_call, total - first);
    ptrs.assign(3 * count, nullptr);
    for (size_t i = 0; i < count; ++i) {
      size_t problem = first + i;
      const std::array<int64_t, 3>& off = offsets[problem / size_t(p.batch)];
      int64_t j = int64_t(problem % size_t(p.batch));
      for (int s = 0; s < 3; ++s) ptrs[size_t(s) * count + i] = base[s] + (off[size_t(s)] + j * batch_stride[s]) * es;
    }
    CUdeviceptr arrays = cuda_upload_arguments(ptrs.data(), ptrs.size() * sizeof(void*), out.device().index);
    auto array = [&](int s) { return reinterpret_cast<void* const*>(arrays + size_t(s) * count * sizeof(void*)); };
    check_cublas(api.cublasGemmBatchedEx(ctx.cublas(), c.b.op, c.a.op, int(p.n), int(p.m), int(p.k), c.alpha(),
                                         array(1), c.type, int(c.b.ld), array(0), c.type, int(c.a.ld), c.beta(),
                                         array(2), c.type, int(p.c.row), int(count), c.compute, kCublasGemmDefault),
                 "matmul (cuBLAS, batched by pointers)");
  }
}

}  // namespace kiln
