// The forward and backward graphs follow the operations NVIDIA's cuDNN frontend builds for its
// composite SDPA nodes (the form cuDNN 9 before 9.21 matches to its fused attention engines):
//   forward:  S = Q K^T; S *= scale; [causal: S = select(row >= col, S, -inf)];
//             m = max(S); E = exp(S - m); l = sum(E); stats = m + log(l); O = (E / l) V
//   backward: D = rowsum(dO * O); S = Q K^T * scale - stats; [causal mask]; P = exp(S);
//             dV = P^T dO; dS = (dO V^T - D) * P * scale; dK = dS^T Q; dQ = dS K
// K and V enter transposed (their last two dims and strides swapped), as the backend expects;
// the backward's D and its f32 dQ accumulator live in kiln-allocated memory beside the plan's
// workspace. Plans are built once per shape, strides, dtype, scale and mask, and cached; on its
// first use each graph times the plans of cuDNN's first few engine configurations and keeps the
// fastest.
#include "dsl/eager/attention_cudnn.h"

#include <cmath>
#include <cstring>
#include <vector>
#include <map>
#include <memory>
#include <mutex>

#include "dsl/creation.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/cudnn_graph.h"
#include "dsl/error.h"

namespace kiln {

namespace {

using namespace cudnn;
using Dims = CudnnGraph::Dims;

DataType cudnn_type(DType t) {
  KILN_CHECK(t == DType::bf16 || t == DType::f16, "attention: cuDNN runs bf16 and f16, got ", t);
  return t == DType::bf16 ? kDataBFloat16 : kDataHalf;
}

// The operand as cuDNN reads it: features contiguous, every other stride a multiple of 8
// elements (16 bytes), the first element 16-byte aligned; else a contiguous copy.
Tensor readable(const Tensor& t) {
  const Strides& s = t.strides();
  bool ok = s[3] == 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int d = 0; d < 3; ++d) ok = ok && s[size_t(d)] % 8 == 0;
  return ok ? t : t.contiguous();
}

Dims dims_of(const Tensor& t) { return Dims(t.shape().begin(), t.shape().end()); }
Dims strides_of(const Tensor& t) { return Dims(t.strides().begin(), t.strides().end()); }
// The dims or strides of [B, H, R, C] as [B, H, C, R].
Dims swapped(Dims d) {
  std::swap(d[2], d[3]);
  return d;
}
Dims dense(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// Puts the causal mask (key j is seen by query i when j <= i) on the scores s.
int64_t mask_causally(CudnnGraph& g, int64_t s, const Dims& dims) {
  int64_t row = g.pointwise(kGenIndex, s, -1, -1, g.virtual_tensor(dims, dense(dims), kDataInt32), kDataFloat, 2);
  int64_t col = g.pointwise(kGenIndex, s, -1, -1, g.virtual_tensor(dims, dense(dims), kDataInt32), kDataFloat, 3);
  int64_t seen = g.pointwise(kCmpGe, row, col, -1, g.virtual_tensor(dims, dense(dims), kDataBoolean), kDataBoolean);
  return g.pointwise(kBinarySelect, s, g.scalar(-INFINITY), seen);
}

struct ForwardIds {
  int64_t q, kt, v, o, stats;
};
struct BackwardIds {
  int64_t q, kt, vt, o, grad_o, stats, grad_q, grad_k, grad_v, rowsum, grad_q_f32;
};

std::unique_ptr<CudnnGraph> build_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                          double scale, bool causal, ForwardIds& id) {
  auto g = std::make_unique<CudnnGraph>("attention forward (cuDNN)");
  DataType io = cudnn_type(q.dtype());
  const int64_t b = q.size(0), h = q.size(1), sq = q.size(2), skv = k.size(2);
  const Dims scores{b, h, sq, skv}, rows{b, h, sq, 1}, row_strides{h * sq, sq, 1, 1};
  id.q = g->tensor(dims_of(q), strides_of(q), io);
  id.kt = g->tensor(swapped(dims_of(k)), swapped(strides_of(k)), io);
  id.v = g->tensor(dims_of(v), strides_of(v), io);
  id.o = g->tensor(dims_of(o), strides_of(o), io);
  id.stats = g->tensor(rows, row_strides, kDataFloat);
  int64_t s = g->matmul(id.q, id.kt, g->virtual_tensor(scores, dense(scores)));
  s = g->pointwise(kMul, s, g->scalar(float(scale)));
  if (causal) s = mask_causally(*g, s, scores);
  int64_t max = g->reduction(kReduceMax, s, g->virtual_tensor(rows, row_strides));
  int64_t e = g->pointwise(kExp, g->pointwise(kSub, s, max));
  int64_t sum = g->reduction(kReduceAdd, e, g->virtual_tensor(rows, row_strides));
  g->pointwise(kAdd, max, g->pointwise(kLog, sum), -1, id.stats);
  int64_t p = g->pointwise(kDiv, e, sum, -1, g->virtual_tensor(scores, dense(scores), io));
  g->matmul(p, id.v, id.o);
  return g;
}

std::unique_ptr<CudnnGraph> build_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                           const Tensor& grad_o, const Tensor& grad_q, const Tensor& grad_k,
                                           const Tensor& grad_v, double scale, bool causal, BackwardIds& id) {
  auto g = std::make_unique<CudnnGraph>("attention backward (cuDNN)");
  DataType io = cudnn_type(q.dtype());
  const int64_t b = q.size(0), h = q.size(1), sq = q.size(2), skv = k.size(2), dv = v.size(3);
  const Dims scores{b, h, sq, skv}, scores_t{b, h, skv, sq}, scores_t_strides{h * sq * skv, sq * skv, 1, skv};
  const Dims rows{b, h, sq, 1}, row_strides{h * sq, sq, 1, 1};
  id.q = g->tensor(dims_of(q), strides_of(q), io);
  id.kt = g->tensor(swapped(dims_of(k)), swapped(strides_of(k)), io);
  id.vt = g->tensor(swapped(dims_of(v)), swapped(strides_of(v)), io);
  id.o = g->tensor(dims_of(o), strides_of(o), io);
  id.grad_o = g->tensor(dims_of(grad_o), strides_of(grad_o), io);
  id.stats = g->tensor(rows, row_strides, kDataFloat);
  id.grad_q = g->tensor(dims_of(grad_q), strides_of(grad_q), io);
  id.grad_k = g->tensor(dims_of(grad_k), strides_of(grad_k), io);
  id.grad_v = g->tensor(dims_of(grad_v), strides_of(grad_v), io);
  id.rowsum = g->tensor(rows, row_strides, kDataFloat);
  id.grad_q_f32 = g->tensor(dims_of(q), dense(dims_of(q)), kDataFloat);
  // D = rowsum(dO * O)
  int64_t d_o = g->pointwise(kMul, id.grad_o, id.o, -1,
                             g->virtual_tensor({b, h, sq, dv}, {h * sq * dv, sq * dv, h * dv, 1}));
  int64_t d = g->reduction(kReduceAdd, d_o, g->virtual_tensor(rows, row_strides));
  g->pointwise(kMul, d, g->scalar(1.0f), -1, id.rowsum);
  // P = exp(scale * Q K^T - stats), masked
  int64_t s = g->matmul(id.q, id.kt, g->virtual_tensor(scores, dense(scores)));
  s = g->pointwise(kMul, s, g->scalar(float(scale)));
  s = g->pointwise(kSub, s, id.stats);
  if (causal) s = mask_causally(*g, s, scores);
  int64_t p = g->pointwise(kExp, s);
  // dV = P^T dO
  g->matmul(g->reshape(p, g->virtual_tensor(scores_t, scores_t_strides, io)), id.grad_o, id.grad_v);
  // dS = (dO V^T - D) * P * scale
  int64_t dp = g->matmul(id.grad_o, id.vt, g->virtual_tensor(scores, dense(scores)));
  int64_t ds = g->pointwise(kMul, g->pointwise(kMul, g->pointwise(kSub, dp, id.rowsum), p), g->scalar(float(scale)));
  // dK = dS^T Q; dQ = dS K (accumulated in f32, then converted)
  g->matmul(g->reshape(ds, g->virtual_tensor(scores_t, scores_t_strides, io)), id.q, id.grad_k);
  int64_t k_again = g->reshape(id.kt, g->virtual_tensor(dims_of(k), strides_of(k)));
  g->matmul(ds, k_again, id.grad_q_f32);
  g->pointwise(kIdentity, id.grad_q_f32, -1, -1, id.grad_q);
  return g;
}

// The cache key: the pass, dtype, mask, scale and every operand's shape and strides.
std::vector<int64_t> key_of(int64_t pass, const TensorList& operands, double scale, bool causal) {
  int64_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  std::vector<int64_t> key{pass, int64_t(operands[0].dtype()), int64_t(causal), bits};
  for (const Tensor& t : operands) {
    key.insert(key.end(), t.shape().begin(), t.shape().end());
    key.insert(key.end(), t.strides().begin(), t.strides().end());
  }
  return key;
}

struct Cached {
  std::unique_ptr<CudnnGraph> graph;
  ForwardIds forward{};
  BackwardIds backward{};
};

// Plans by key. A graph is used under the lock: it keeps its last variant pack and tunes itself
// on its first use.
std::mutex cache_mu;
std::map<std::vector<int64_t>, Cached>& cache() {
  static std::map<std::vector<int64_t>, Cached> c;
  return c;
}

// Runs g on these pointers, first timing its plans when it has more than one (and, for the
// backward, cuDNN clears its dQ accumulator itself, so that repeated runs are harmless).
void run_graph(CudnnGraph& g, cudnnHandle_t handle, int index, const std::map<int64_t, void*>& pointers,
               void* workspace, bool can_repeat) {
  if (!g.tuned() && can_repeat)
    g.pick_fastest(handle, index, pointers, workspace);
  else
    g.execute(handle, pointers, workspace);
}

// f32 scratch of at least `bytes`, on q's device, through the caching allocator.
Tensor scratch(size_t bytes, const Tensor& like) {
  int64_t n = int64_t((bytes + 255) / 4);
  return Tensor::empty(Shape{std::max<int64_t>(n, 1)}, TensorOptions{DType::f32, like.device()});
}

}  // namespace

std::vector<std::string> cudnn_attention_plans() {
  std::lock_guard<std::mutex> lock(cache_mu);
  std::vector<std::string> out;
  for (const auto& [key, c] : cache()) {
    std::string shape;
    for (size_t i = 4; i < 8 && i < key.size(); ++i) shape += (shape.empty() ? "[" : ", ") + std::to_string(key[i]);
    out.push_back(std::string(key[0] == 0 ? "forward " : "backward ") + shape + "]" + (key[2] ? " causal" : "") +
                  " " + std::string(name(DType(key[1]))) + ": " + c.graph->engine());
  }
  return out;
}

bool cudnn_attention_supports(int64_t head_dim, int64_t value_dim) {
  return head_dim % 8 == 0 && value_dim % 8 == 0 && head_dim <= 128 && value_dim <= 128 && cudnn_available();
}

TensorList cudnn_attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                                   bool causal, bool merged_heads) {
  const Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in);
  const int64_t b = q.size(0), h = q.size(1), sq = q.size(2);
  // cuDNN writes O through its strides: [B, H, Tq, Dv] as a view of the [B, Tq, H, Dv] result.
  Tensor result = merged_heads ? Tensor::empty(Shape{b, sq, h, v.size(3)}, q.options())
                               : Tensor::empty(Shape{b, h, sq, v.size(3)}, q.options());
  Tensor out = merged_heads ? result.transpose(1, 2) : result;
  Tensor lse = Tensor::empty(Shape{b, h, sq}, TensorOptions{DType::f32, q.device()});
  if (out.numel() == 0) return {result, lse};
  const int index = q.device().index;
  cudnnHandle_t handle = cudnn_handle(index);
  std::lock_guard<std::mutex> lock(cache_mu);
  Cached& c = cache()[key_of(0, {q, k, v, out}, scale, causal)];
  if (!c.graph) {
    c.graph = build_forward(q, k, v, out, scale, causal, c.forward);
    c.graph->finalize(handle);
  }
  const ForwardIds& id = c.forward;
  Tensor workspace = scratch(c.graph->workspace_bytes(), q);
  run_graph(*c.graph, handle, index,
            {{id.q, q.data_ptr()}, {id.kt, k.data_ptr()}, {id.v, v.data_ptr()}, {id.o, out.data_ptr()},
             {id.stats, lse.data_ptr()}},
            workspace.data_ptr(), true);
  return {result, lse};
}

TensorList cudnn_attention_backward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& out_in,
                                    const Tensor& grad_out_in, const Tensor& lse_in, double scale, bool causal) {
  const Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in), out = readable(out_in),
               grad_out = readable(grad_out_in), lse = lse_in.contiguous();
  if (q.numel() == 0 || k.numel() == 0)
    return {zeros(q.shape(), q.options()), zeros(k.shape(), k.options()), zeros(v.shape(), v.options())};
  Tensor grad_q = Tensor::empty(q.shape(), q.options()), grad_k = Tensor::empty(k.shape(), k.options()),
         grad_v = Tensor::empty(v.shape(), v.options());
  const int index = q.device().index;
  cudnnHandle_t handle = cudnn_handle(index);
  std::lock_guard<std::mutex> lock(cache_mu);
  Cached& c = cache()[key_of(1, {q, k, v, out, grad_out}, scale, causal)];
  if (!c.graph) {
    c.graph = build_backward(q, k, v, out, grad_out, grad_q, grad_k, grad_v, scale, causal, c.backward);
    c.graph->finalize(handle);
  }
  const BackwardIds& id = c.backward;
  CudnnGraph* g = c.graph.get();
  // One block: D (f32 per row), the f32 dQ accumulator, then the plan's workspace.
  auto round = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t rowsum_bytes = round(size_t(lse.numel()) * 4), accum_bytes = round(size_t(q.numel()) * 4);
  Tensor block = scratch(rowsum_bytes + accum_bytes + g->workspace_bytes(), q);
  char* base = static_cast<char*>(block.data_ptr());
  // cuDNN clears the accumulator itself from 9.6 on; before, the caller must.
  const bool clears_itself = cudnn_version() >= 90600;
  if (!clears_itself)
    check_cuda(cuda_api().cuMemsetD32Async(CUdeviceptr(base + rowsum_bytes), 0, size_t(q.numel()),
                                           cuda_context(index).stream),
               "attention backward: clearing the dQ accumulator");
  run_graph(*g, handle, index,
            {{id.q, q.data_ptr()},
              {id.kt, k.data_ptr()},
              {id.vt, v.data_ptr()},
              {id.o, out.data_ptr()},
              {id.grad_o, grad_out.data_ptr()},
              {id.stats, lse.data_ptr()},
              {id.grad_q, grad_q.data_ptr()},
              {id.grad_k, grad_k.data_ptr()},
              {id.grad_v, grad_v.data_ptr()},
              {id.rowsum, base},
             {id.grad_q_f32, base + rowsum_bytes}},
            base + rowsum_bytes + accum_bytes, clears_itself);
  return {grad_q, grad_k, grad_v};
}

}  // namespace kiln
