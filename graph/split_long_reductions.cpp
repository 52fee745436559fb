// split_long_reductions (graph/passes.h): reductions too long for one block to run well become
// split reductions, as Inductor splits long reductions.
// - A softmax, log_softmax or logsumexp over long rows: the row [C] is viewed as K chunks of J
//   elements; one pass over the rows gives each chunk's log-sum-exp (its max, then its sum of
//   exps: a chunk is short enough that its second read hits the cache), the row's log-sum-exp is
//   that of its K chunks' (log sum_k exp(lse_k)), and the outputs read the row once more:
//   exp(x - lse), x - lse. Unsplit, the schedule read a row three times (max, sum, output) from
//   memory: 196 KiB a row for GPT-2's [8192, 50304] logits. The logsumexp op keeps infinite rows
//   and chunks exact (a chunk of -inf alone is -inf, not NaN).
// - A cross_entropy over long rows: the rows' log-sum-exps as above, each row's target logit
//   gathered by an embedding of the logits viewed as one column (row * C + target, the target
//   clamped to [0, C) as the fused op does), and the mean of their differences. The fused op read
//   each row three times (max, sum, target).
// - A sum, mean, max or min over every element of a large tensor: the elements viewed as K chunks
//   of J, each chunk reduced by a block (the row schedule: loads spread over a block's threads,
//   combined through shuffles), then the K results by one block. The mean of equal chunks' means is
//   the mean. Unsplit, the GPU schedule's full reductions end in a serial sum of partials by one
//   thread.
#include "graph/emitter.h"
#include "graph/passes.h"

#include <algorithm>

namespace kiln {

namespace {

// Rows at least this long are split (64 KiB of f32; the GPU schedule streams rows this long
// through one warp, gpu_schedule.cpp).
constexpr int64_t kLongRow = 16384;
// Full reductions of at least this many elements are split.
constexpr int64_t kLongFull = 1 << 20;
// A chunk is the longest divisor of the row in [kChunkMin, kChunkMax]: a row of the GPU
// schedule's block-per-row reductions, short enough (32 KiB of f32) that its second read (the sum
// of exps after the max) hits the cache. On one H200, softmax [8192, 50304] with chunks of at most
// 1024 / 2048 / 4096 / 8192 elements (786 / 1572 / 3144 / 6288) ran at 2602 / 2244 / 2748 / 2847
// GB/s (bench/RESULTS.md, twelfth session).
constexpr int64_t kChunkMin = 128, kChunkMax = 8192;

int64_t chunk_of(int64_t row) {
  for (int64_t j = std::min(kChunkMax, row / 2); j >= kChunkMin; --j)
    if (row % j == 0) return j;
  return 0;
}

// Whether n reduces every element of its input with sum, mean, max or min.
bool full_reduction(const Graph& g, const GraphNode& n) {
  const std::string& op = n.op->name;
  if (op != "sum" && op != "mean" && op != "max" && op != "min") return false;
  const int64_t rank = int64_t(g.values[size_t(n.inputs[0])].meta.shape.size());
  auto dims = n.attrs.get_or<std::vector<int64_t>>("dims", {});
  return dims.empty() || int64_t(wrap_dims(op, dims, rank).size()) == rank;
}

// The chunk length when node n is split (see the top of the file): a row op along the last dim of
// rows of at least kLongRow, or a full reduction of at least kLongFull elements, of a contiguous
// static f32 input on CUDA; 0 when it is not split.
int64_t split_chunk(const Graph& g, const GraphNode& n) {
  const std::string& op = n.op->name;
  bool full = full_reduction(g, n);
  if (!full && op != "softmax" && op != "log_softmax" && op != "logsumexp" && op != "cross_entropy") return 0;
  const Value& x = g.values[size_t(n.inputs[0])];
  const int64_t rank = int64_t(x.meta.shape.size());
  if (rank == 0 || !x.meta.device.is_cuda() || x.meta.dtype != DType::f32) return 0;
  if (g.values[size_t(n.outputs[0])].meta.dtype != DType::f32) return 0;
  for (const SymDim& d : x.sym)
    if (!g.shape_env->canonical(d).is_static()) return 0;
  if (x.strides != contiguous_strides(x.meta.shape)) return 0;
  if (full) return numel(x.meta.shape) >= kLongFull ? chunk_of(numel(x.meta.shape)) : 0;
  if (op == "cross_entropy") {
    if (rank != 2) return 0;  // logits (N, C)
  } else if (op == "logsumexp") {
    auto dims = n.attrs.get<std::vector<int64_t>>("dims");
    if (dims.size() != 1 || wrap_dim(op, dims[0], rank) != rank - 1) return 0;
  } else if (wrap_dim(op, n.attrs.get<int64_t>("dim"), rank) != rank - 1) {
    return 0;
  }
  int64_t row = x.meta.shape.back();
  return row >= kLongRow ? chunk_of(row) : 0;
}

// cross_entropy(x, targets) of logits x (N, C) with its rows' log-sum-exps lse (N): the loss and lse.
std::vector<int> cross_entropy(Emitter& e, int x, int targets, int lse) {
  const Shape& shape = e.g.values[size_t(x)].meta.shape;
  const int64_t rows = shape[0], classes = shape[1];
  Emitter index{e.g, e.device, DType::i64};
  Attrs offsets{{"start", 0.0}, {"end", double(rows * classes)}, {"step", double(classes)},
                {"dtype", std::string(name(DType::i64))}, {"device", e.device.str()}};
  int target = e.op("minimum", {e.op("maximum", {targets, index.constant(0)}), index.constant(double(classes - 1))});
  int at = e.op("add", {e.op("arange", {}, offsets), target});
  // Under autocast x is the f32 cast of bf16 logits: the gather reads the logits themselves and
  // casts the one it picks, so that no step stores x (the row reductions and the gradient's
  // pipeline compute the cast where they read it: schedules/fusion.cpp).
  int source = x;
  if (int p = e.g.values[size_t(x)].producer; p >= 0 && e.g.nodes[size_t(p)].op->name == "cast") {
    const Value& from = e.g.values[size_t(e.g.nodes[size_t(p)].inputs[0])];
    if (is_floating(from.meta.dtype) && itemsize(from.meta.dtype) < itemsize(DType::f32) &&
        from.strides == contiguous_strides(from.meta.shape))
      source = e.g.nodes[size_t(p)].inputs[0];
  }
  int picked = e.view(e.op("embedding", {e.view(source, {rows * classes, 1}), at}), {rows});
  if (source != x) picked = e.cast(picked, DType::f32);
  int loss = e.reduce("mean", e.op("sub", {lse, picked}), {}, false);
  return {loss, lse};
}

// The split form of node n (see the top of the file): the values that replace its outputs.
std::vector<int> split(Emitter& e, const GraphNode& n, const std::vector<int>& ins, int64_t chunk) {
  const std::string& op = n.op->name;
  const int x = ins[0];
  const Shape& shape = e.g.values[size_t(x)].meta.shape;
  if (full_reduction(e.g, n)) {
    // The chunks' [K] of x viewed [K, J], then their 0-d reduction by the same op.
    int64_t count = numel(shape);
    int y = e.reduce(op.c_str(), e.reduce(op.c_str(), e.view(x, {count / chunk, chunk}), {-1}, false), {-1}, false);
    return {n.attrs.get_or<bool>("keepdim", false) ? e.view(y, Shape(shape.size(), 1)) : y};
  }
  Shape lead(shape.begin(), shape.end() - 1), chunks = lead;
  chunks.insert(chunks.end(), {shape.back() / chunk, chunk});
  // Both along the last dim (row reductions): the chunks' [..., K] of x viewed [..., K, J], then
  // the rows' [..., 1] of the chunks'.
  int lse = e.reduce("logsumexp", e.reduce("logsumexp", e.view(x, chunks), {-1}, false), {-1}, true);
  if (op == "softmax") return {e.op("exp", {e.op("sub", {x, lse})})};
  if (op == "log_softmax") return {e.op("sub", {x, lse})};
  if (op == "cross_entropy") return cross_entropy(e, x, ins[1], e.view(lse, lead));
  return {n.attrs.get_or<bool>("keepdim", false) ? lse : e.view(lse, lead)};
}

}  // namespace

int split_long_reductions(Graph& g) {
  GraphRewrite r(g);
  int count = 0;
  for (const GraphNode& node : g.nodes) {
    int64_t chunk = split_chunk(g, node);
    if (chunk == 0) {
      r.copy(node);
      continue;
    }
    Emitter e{r.out, g.values[size_t(node.outputs[0])].meta.device, DType::f32};
    size_t mark = r.out.nodes.size();
    r.replace(node, mark, split(e, node, r.ids(node.inputs), chunk), "split_long_reductions");
    ++count;
  }
  if (count == 0) return 0;
  g = std::move(r).finish();
  return count;
}

}  // namespace kiln
