#include "dsl/eager/cublas_gemm.h"

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

void cublas_gemm(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, int64_t oa,
                 int64_t ob, int64_t oc) {
  KILN_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX && p.batch <= INT_MAX, "matmul: sizes m=", p.m,
             " n=", p.n, " k=", p.k, " exceed cuBLAS's 32-bit sizes");
  CublasOperand ca, cb;  // cuBLAS computes C^T (n x m) = B^T (n x k) * A^T (k x m)
  KILN_CHECK(as_operand(p.b, p.k, p.n, cb) && as_operand(p.a, p.m, p.k, ca),
             "matmul: internal: an operand is neither row- nor column-major");
  CudaContext& ctx = cuda_context(out.device().index);
  const CudaApi& api = cuda_api_with_cublas();
  DType t = out.dtype();
  int type = cuda_type(t);
  int compute = t == DType::f64 ? kCublasCompute64F
                : t == DType::f32 && float32_matmul_precision() == Float32MatmulPrecision::high
                    ? kCublasCompute32FFastTf32
                    : kCublasCompute32F;
  const float alpha32 = 1, beta32 = 0;
  const double alpha64 = 1, beta64 = 0;
  const void* alpha = t == DType::f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = t == DType::f64 ? static_cast<const void*>(&beta64) : &beta32;
  size_t es = itemsize(t);
  const char* pa = static_cast<const char*>(a.data_ptr()) + oa * int64_t(es);
  const char* pb = static_cast<const char*>(b.data_ptr()) + ob * int64_t(es);
  char* pc = static_cast<char*>(out.data_ptr()) + oc * int64_t(es);
  check_cublas(api.cublasGemmStridedBatchedEx(ctx.cublas(), cb.op, ca.op, int(p.n), int(p.m), int(p.k), alpha, pb,
                                              type, int(cb.ld), p.b.batch, pa, type, int(ca.ld), p.a.batch, beta,
                                              pc, type, int(p.c.row), p.c.batch, int(p.batch), compute,
                                              kCublasGemmDefault),
               "matmul (cuBLAS)");
}

}  // namespace kiln
