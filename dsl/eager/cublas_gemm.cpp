#include "dsl/eager/cublas_gemm.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

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

namespace {

// A cuBLASLt GEMM with a bias epilogue, set up once per problem form: descriptors and the
// algorithm the heuristic picked (the bias pointer is set per call).
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  CublasLtHeuristic algo{};
};

// The device, then the problem form: a heuristic's algorithm belongs to the device it was asked on.
using LtKey = std::tuple<int, int64_t, int64_t, int64_t, int, int, int64_t, int64_t, int64_t, int, int>;

const LtPlan& lt_plan(CudaContext& ctx, int device, const GemmProblem& p, const CublasCall& c) {
  static std::mutex mu;
  static std::map<LtKey, LtPlan> plans;  // descriptors live as long as the process
  LtKey key{device, p.m, p.n, p.k, c.a.op, c.b.op, c.a.ld, c.b.ld, p.c.row, c.type, c.compute};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const CudaApi& api = cuda_api_with_cublas();
  LtPlan plan;
  const int scale = c.element == 8 ? kCudaR64F : kCudaR32F;
  check_cublas(api.cublasLtMatmulDescCreate(&plan.desc, c.compute, scale), "matmul_bias (cuBLASLt descriptor)");
  const int32_t epilogue = kCublasLtEpilogueBias;
  // cuBLAS computes D^T (n x m, column-major) = op(b)^T op(a)^T; the bias runs along D^T's rows (n).
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescTransA, &c.b.op, sizeof(int32_t)),
               "matmul_bias (cuBLASLt transa)");
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescTransB, &c.a.op, sizeof(int32_t)),
               "matmul_bias (cuBLASLt transb)");
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescEpilogue, &epilogue, sizeof(epilogue)),
               "matmul_bias (cuBLASLt epilogue)");
  auto layout = [&](cublasLtMatrixLayout_t& l, int op, int64_t rows, int64_t cols, int64_t ld) {
    if (op == kCublasOpT) std::swap(rows, cols);  // the stored matrix, before the op
    check_cublas(api.cublasLtMatrixLayoutCreate(&l, c.type, uint64_t(rows), uint64_t(cols), ld),
                 "matmul_bias (cuBLASLt layout)");
  };
  layout(plan.a, c.b.op, p.n, p.k, c.b.ld);
  layout(plan.b, c.a.op, p.k, p.m, c.a.ld);
  layout(plan.c, kCublasOpN, p.n, p.m, p.c.row);
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(api.cublasLtMatmulPreferenceCreate(&pref), "matmul_bias (cuBLASLt preference)");
  // Asked once per plan; released however the heuristic ends.
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      pref_owner(pref, api.cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = ctx.gemm_workspace_bytes();
  check_cublas(api.cublasLtMatmulPreferenceSetAttribute(pref, kCublasLtPrefMaxWorkspaceBytes, &workspace,
                                                        sizeof(workspace)),
               "matmul_bias (cuBLASLt workspace)");
  int found = 0;
  check_cublas(api.cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                                                  &plan.algo, &found),
               "matmul_bias (cuBLASLt heuristic)");
  KILN_CHECK(found > 0, "matmul_bias: cuBLASLt has no algorithm for m=", p.m, " n=", p.n, " k=", p.k);
  return plans.emplace(key, plan).first->second;
}

}  // namespace

void cublas_gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out, const GemmProblem& p) {
  KILN_CHECK(p.batch == 1, "matmul_bias: internal: cuBLASLt's bias epilogue takes one matrix (batch ", p.batch, ")");
  CublasCall c = prepare(out, p);
  CudaContext& ctx = cuda_context(out.device().index);
  const LtPlan& plan = lt_plan(ctx, out.device().index, p, c);
  const CudaApi& api = cuda_api_with_cublas();
  static std::mutex call_mu;  // the plan's descriptor carries this call's bias pointer
  std::lock_guard<std::mutex> lock(call_mu);
  const void* bias_ptr = bias.data_ptr();
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescBiasPointer, &bias_ptr, sizeof(bias_ptr)),
               "matmul_bias (cuBLASLt bias)");
  check_cublas(api.cublasLtMatmul(ctx.cublaslt(), plan.desc, c.alpha(), b.data_ptr(), plan.a, a.data_ptr(), plan.b,
                                  c.beta(), out.data_ptr(), plan.c, out.data_ptr(), plan.c, plan.algo.algo,
                                  ctx.gemm_workspace(), ctx.gemm_workspace_bytes(), ctx.stream),
               "matmul_bias (cuBLASLt)");
}

}  // namespace kiln
