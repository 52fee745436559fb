#include "dsl/eager/cublas_gemm.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
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

// A cuBLASLt GEMM with an epilogue, set up once per problem form and epilogue: descriptors and the
// heuristic's candidate algorithms (none when it found none), of which the first call times each
// and keeps the fastest. The bias and aux pointers are set per call.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<CublasLtHeuristic> algos;
  int chosen = -1;  // -1: not timed yet
};

// How many of the heuristic's algorithms the first call times. Its first choice for GELU's
// derivative on GPT-2's [8192, 768] x [768, 3072] took 91 us on an H200, where the plain GEMM takes 55.
constexpr int kLtCandidates = 8;

// The device, then the problem form and the epilogue: a heuristic's algorithm belongs to the
// device it was asked on.
using LtKey = std::tuple<int, int64_t, int64_t, int64_t, int, int, int64_t, int64_t, int64_t, int, int, int>;

int32_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::bias: return kCublasLtEpilogueBias;
    case GemmEpilogue::bias_gelu: return kCublasLtEpilogueGeluBias;
    case GemmEpilogue::bias_gelu_aux: return kCublasLtEpilogueGeluAuxBias;
    case GemmEpilogue::dgelu: return kCublasLtEpilogueDGelu;
    case GemmEpilogue::bgradb: return kCublasLtEpilogueBgradb;
  }
  return kCublasLtEpilogueBias;
}

bool takes_aux(GemmEpilogue e) { return e == GemmEpilogue::bias_gelu_aux || e == GemmEpilogue::dgelu; }
// Whether the epilogue reads the bias pointer (BGRADB writes the bias gradient there).
bool takes_bias(GemmEpilogue e) { return e != GemmEpilogue::dgelu; }

LtPlan& lt_plan(CudaContext& ctx, int device, const GemmProblem& p, const CublasCall& c, GemmEpilogue e) {
  static std::mutex mu;
  static std::map<LtKey, LtPlan> plans;  // descriptors live as long as the process
  LtKey key{device, p.m, p.n, p.k, c.a.op, c.b.op, c.a.ld, c.b.ld, p.c.row, c.type, c.compute, int(e)};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const CudaApi& api = cuda_api_with_cublas();
  LtPlan plan;
  const int scale = c.element == 8 ? kCudaR64F : kCudaR32F;
  check_cublas(api.cublasLtMatmulDescCreate(&plan.desc, c.compute, scale), "matmul epilogue (cuBLASLt descriptor)");
  const int32_t epilogue = lt_epilogue(e);
  // cuBLAS computes D^T (n x m, column-major) = op(b)^T op(a)^T; the bias runs along D^T's rows (n),
  // and GELU's input (aux) is stored as D is.
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescTransA, &c.b.op, sizeof(int32_t)),
               "matmul epilogue (cuBLASLt transa)");
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescTransB, &c.a.op, sizeof(int32_t)),
               "matmul epilogue (cuBLASLt transb)");
  check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescEpilogue, &epilogue, sizeof(epilogue)),
               "matmul epilogue (cuBLASLt epilogue)");
  if (takes_aux(e)) {
    const int64_t aux_ld = p.c.row;
    check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescEpilogueAuxLd, &aux_ld, sizeof(aux_ld)),
                 "matmul epilogue (cuBLASLt aux ld)");
  }
  auto layout = [&](cublasLtMatrixLayout_t& l, int op, int64_t rows, int64_t cols, int64_t ld) {
    if (op == kCublasOpT) std::swap(rows, cols);  // the stored matrix, before the op
    check_cublas(api.cublasLtMatrixLayoutCreate(&l, c.type, uint64_t(rows), uint64_t(cols), ld),
                 "matmul epilogue (cuBLASLt layout)");
  };
  layout(plan.a, c.b.op, p.n, p.k, c.b.ld);
  layout(plan.b, c.a.op, p.k, p.m, c.a.ld);
  layout(plan.c, kCublasOpN, p.n, p.m, p.c.row);
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(api.cublasLtMatmulPreferenceCreate(&pref), "matmul epilogue (cuBLASLt preference)");
  // Asked once per plan; released however the heuristic ends.
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      pref_owner(pref, api.cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = ctx.gemm_workspace_bytes();
  check_cublas(api.cublasLtMatmulPreferenceSetAttribute(pref, kCublasLtPrefMaxWorkspaceBytes, &workspace,
                                                        sizeof(workspace)),
               "matmul epilogue (cuBLASLt workspace)");
  int found = 0;
  plan.algos.resize(kLtCandidates);
  // An epilogue cuBLASLt does not offer for this form is answered with "not supported" or with no
  // algorithm: either way the caller computes it another way.
  int status = api.cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                                  kLtCandidates, plan.algos.data(), &found);
  plan.algos.resize(status == 0 ? size_t(std::max(found, 0)) : 0);
  return plans.emplace(key, plan).first->second;
}

// Runs the plan's algorithm `i` on the stream.
void run_lt(const CudaApi& api, CudaContext& ctx, const LtPlan& plan, size_t i, const CublasCall& c, const Tensor& a,
            const Tensor& b, const Tensor& out) {
  check_cublas(api.cublasLtMatmul(ctx.cublaslt(), plan.desc, c.alpha(), b.data_ptr(), plan.a, a.data_ptr(), plan.b,
                                  c.beta(), out.data_ptr(), plan.c, out.data_ptr(), plan.c, plan.algos[i].algo,
                                  ctx.gemm_workspace(), ctx.gemm_workspace_bytes(), ctx.stream),
               "matmul epilogue (cuBLASLt)");
}

// Times each candidate once warmed up (the median of three runs, as CudnnGraph::pick_fastest does)
// on the call's own operands, which the call's run then overwrites, and keeps the fastest: one
// host wait per problem form, on its first call.
void choose_algorithm(const CudaApi& api, CudaContext& ctx, LtPlan& plan, const CublasCall& c, const Tensor& a,
                      const Tensor& b, const Tensor& out) {
  plan.chosen = 0;
  if (plan.algos.size() < 2) return;
  std::vector<double> ms = time_candidates(out.device().index, plan.algos.size(),
                                           [&](size_t i) { run_lt(api, ctx, plan, i, c, a, b, out); });
  plan.chosen = int(std::min_element(ms.begin(), ms.end()) - ms.begin());
}

}  // namespace

bool cublas_gemm_epilogue(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, GemmEpilogue e,
                          const Tensor& bias, const Tensor& aux) {
  KILN_CHECK(p.batch == 1, "matmul epilogue: internal: cuBLASLt's epilogues take one matrix (batch ", p.batch, ")");
  if (takes_aux(e) && p.c.row % 8 != 0) return false;  // cuBLASLt: aux's ld a multiple of 8
  // The heuristic was asked without pointers, which it reads as aligned to anything.
  auto aligned = [](const Tensor& t) { return !t.defined() || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  if (!aligned(a) || !aligned(b) || !aligned(out) || !aligned(bias) || !aligned(aux)) return false;
  CublasCall c = prepare(out, p);
  CudaContext& ctx = cuda_context(out.device().index);
  LtPlan& plan = lt_plan(ctx, out.device().index, p, c, e);
  if (plan.algos.empty()) return false;
  const CudaApi& api = cuda_api_with_cublas();
  static std::mutex call_mu;  // the plan's descriptor carries this call's bias and aux pointers; its choice
  std::lock_guard<std::mutex> lock(call_mu);
  if (takes_bias(e)) {
    const void* bias_ptr = bias.data_ptr();
    check_cublas(api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescBiasPointer, &bias_ptr, sizeof(bias_ptr)),
                 "matmul epilogue (cuBLASLt bias)");
  }
  if (takes_aux(e)) {
    const void* aux_ptr = aux.data_ptr();
    check_cublas(
        api.cublasLtMatmulDescSetAttribute(plan.desc, kCublasLtDescEpilogueAuxPointer, &aux_ptr, sizeof(aux_ptr)),
        "matmul epilogue (cuBLASLt aux)");
  }
  if (plan.chosen < 0) choose_algorithm(api, ctx, plan, c, a, b, out);
  run_lt(api, ctx, plan, size_t(plan.chosen), c, a, b, out);
  return true;
}

}  // namespace kiln
