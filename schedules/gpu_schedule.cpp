#include "schedules/gpu_schedule.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "dsl/error.h"
#include "schedules/schedule_roots.h"

namespace kiln {

using namespace Halide;

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int64_t kThreadPerRowMax = 64;     // rows this short: one thread per row
constexpr int64_t kFullPartials = 1 << 16;   // threads of a full reduction's first pass
constexpr int64_t kFewColumns = 1 << 17;     // column reductions with fewer outputs get split
constexpr int64_t kColumnChunk = 256;        // rows per chunk of a split column reduction
constexpr int64_t kRowCacheMax = 6144;       // rows this long (24 KiB of f32) are staged in shared memory
const TailStrategy kGuard = TailStrategy::GuardWithIf;

struct RowTuning {
  int threads = kThreads;
  bool stage = false, vector = false;
};

const RowTuning& row_tuning() {
  static const RowTuning t = [] {
    RowTuning r;
    auto env = [](const char* name, int fallback) {
      const char* v = std::getenv(name);
      return v && *v ? std::atoi(v) : fallback;
    };
    r.threads = std::clamp(env("KILN_GPU_ROW_THREADS", kThreads), kWarp, 1024);
    r.stage = env("KILN_GPU_ROW_STAGE", 0) != 0;
    r.vector = env("KILN_GPU_ROW_VECTOR", 0) != 0;
    return r;
  }();
  return t;
}

// Fuses the (pure or reduction) vars of stage s, innermost first, into one loop and returns it.
template <typename V>
V fuse_all(Stage s, const std::vector<V>& vars) {
  V cur = vars.at(0);
  for (size_t i = 1; i < vars.size(); ++i) {
    V next(cur.name() + "_" + vars[i].name());
    s.fuse(cur, vars[i], next);
    cur = next;
  }
  return cur;
}

// One thread per point of `vars` (all of the stage's pure vars), kThreads per block.
void thread_per_point(Stage s, const std::vector<Var>& vars) {
  Var bx("bx"), tx("tx");
  if (vars.empty()) {
    s.gpu_single_thread();
    return;
  }
  s.gpu_tile(fuse_all(s, vars), bx, tx, kThreads, kGuard);
}

// g computed per row inside a block of row_tuning().threads threads at loop `row` of f: per-thread partials
// (each thread strides the row), then kWarp partials, then one thread. Reductions Halide cannot
// split (not provably associative) run serially in one thread.
void block_reduction(Func g, Func f, Var row) {
  LoopLevel at(f, row);
  g.compute_at(at);
  if (g.num_update_definitions() != 1 || g.rvars().empty()) return;
  try {
    RVar r = fuse_all(g.update(), g.rvars()), ro("ro"), ri("ri"), rio("rio"), rii("rii");
    Var u("u"), w("w");
    Func partials = g.update().split(r, ro, ri, row_tuning().threads, kGuard).rfactor(ri, u);
    Func warp = g.update().split(ri, rio, rii, kWarp, kGuard).rfactor(rii, w);
    partials.compute_at(at).gpu_threads(u);
    partials.update().reorder(ro, u).gpu_threads(u);
    warp.compute_at(at).gpu_threads(w);
    warp.update().reorder(rio, w).gpu_threads(w);
  } catch (const CompileError&) {
  }
}

// A Func computed by one GPU thread: a fallback that keeps it off the host.
void on_one_thread(Func g) {
  g.compute_root().gpu_single_thread();
  for (int u = 0; u < g.num_update_definitions(); ++u) g.update(u).gpu_single_thread();
}

// A full reduction g (0-d): partial sums by kFullPartials threads, then by kThreads, then one.
void full_reduction(Func g, int64_t length) {
  g.compute_root().gpu_single_thread();
  if (g.num_update_definitions() != 1) return;
  if (g.rvars().empty()) {
    g.update().gpu_single_thread();
    return;
  }
  try {
    int64_t first = std::clamp<int64_t>(length / 16, kThreads, kFullPartials);
    RVar r = fuse_all(g.update(), g.rvars()), ro("ro"), ri("ri"), rio("rio"), rii("rii");
    Var u("u"), w("w");
    Func partials = g.update().split(r, ro, ri, int(first), kGuard).rfactor(ri, u);
    Func second = g.update().split(ri, rio, rii, kThreads, kGuard).rfactor(rii, w);
    Var bx("bx"), tx("tx");
    partials.compute_root().gpu_tile(u, bx, tx, kThreads, kGuard);
    partials.update().reorder(ro, u).gpu_tile(u, bx, tx, kThreads, kGuard);
    second.compute_root().gpu_tile(w, bx, tx, kThreads, kGuard);
    second.update().reorder(rio, w).gpu_tile(w, bx, tx, kThreads, kGuard);
  } catch (const CompileError&) {
  }
  g.update().gpu_single_thread();
}

// A column reduction g computed once for all its consumers: one thread per kept element looping
// over the reduced dims; with few kept elements and long reductions, chunks of kColumnChunk
// reduced elements per thread first.
void column_reduction(Func g, int64_t kept, int64_t length) {
  std::vector<Var> v = pure_vars(g);
  g.compute_root();
  if (g.num_update_definitions() == 1 && !g.rvars().empty() && kept < kFewColumns && length >= 4 * kColumnChunk) {
    try {
      RVar r = fuse_all(g.update(), g.rvars()), ro("ro"), ri("ri");
      Var p("p");
      Func chunks = g.update().split(r, ro, ri, int(kColumnChunk), kGuard).rfactor(ro, p);
      std::vector<Var> cv = pure_vars(chunks);  // g's vars, then p
      chunks.compute_root();
      thread_per_point(chunks, cv);
      thread_per_point(chunks.update(), cv);
    } catch (const CompileError&) {
    }
  }
  thread_per_point(g, v);
  for (int u = 0; u < g.num_update_definitions(); ++u) thread_per_point(g.update(u), v);
}

// Consecutive elements per thread for `value`: up to 4, so that no load or store of the region
// is wider than 16 bytes (PTX's widest), when its innermost dim is a static multiple of that;
// else 1. Regions with 8-byte values are not vectorized: Halide 14 + LLVM 14's NVPTX backend
// crashed compiling arange(16) in i64 with 2 lanes (tests/schedules/test_gpu_schedule.cpp).
int vector_lanes(const Graph& g, const Region& r, int value) {
  size_t widest = 1;
  for (int n : r.nodes) {
    for (int v : g.nodes[size_t(n)].inputs) widest = std::max(widest, itemsize(g.values[size_t(v)].meta.dtype));
    for (int v : g.nodes[size_t(n)].outputs) widest = std::max(widest, itemsize(g.values[size_t(v)].meta.dtype));
  }
  int lanes = widest >= 8 ? 1 : int(std::min<size_t>(4, 16 / widest));
  const Value& val = g.values[size_t(value)];
  if (val.sym.empty() || lanes < 2) return 1;
  SymDim d = g.shape_env->canonical(val.sym.back());
  return d.is_static() && d.coeff >= lanes && d.coeff % lanes == 0 ? lanes : 1;
}

void pointwise(Func f, int lanes) {
  std::vector<Var> v = pure_vars(f);
  if (v.empty()) {
    f.gpu_single_thread();
    return;
  }
  if (lanes > 1) {
    Var xo("xo"), xi("xi");
    f.split(v[0], xo, xi, lanes, kGuard).vectorize(xi);
    v[0] = xo;
  }
  thread_per_point(f, v);
}

// A row-wise op reads its input row several times (softmax: max, sum of exp, output): inputs with
// the output's shape are loaded once per row into shared memory (coalesced, by all threads) and
// read from there. Returns false when Halide refuses the wrapper (the schedule stays valid).
bool stage_rows_in_shared_memory(const ScheduleRoot& root, const std::vector<Halide::ImageParam>& inputs,
                                 Var row, int64_t length) {
  if (length > kRowCacheMax || !row_tuning().stage) return false;
  std::vector<Func> readers{root.func};
  readers.insert(readers.end(), root.inner.begin(), root.inner.end());
  readers.insert(readers.end(), root.inlined.begin(), root.inlined.end());
  bool staged = false;
  for (const ImageParam& p : inputs) {
    if (p.dimensions() != root.func.dimensions()) continue;
    std::vector<Func> direct;
    for (const Func& f : readers)
      if (Internal::find_direct_calls(f.function()).count(p.name())) direct.push_back(f);
    if (direct.empty()) continue;
    try {
      ImageParam param = p;
      Func cached = param.in(direct);
      Var co("co"), ci("ci"), ct("ct"), cv("cv");
      int lanes = param.type().bytes() >= 8 ? 1 : std::min(4, 16 / param.type().bytes());
      cached.compute_at(root.func, row)
          .split(cached.args()[0], co, ci, lanes * row_tuning().threads, kGuard)
          .split(ci, ct, cv, lanes, kGuard)
          .vectorize(cv)
          .gpu_threads(ct);
      staged = true;
    } catch (const CompileError&) {
    }
  }
  return staged;
}

// Elements of the producing op's input per element of `value` (the row length of a reduction).
int64_t reduction_length(const Graph& g, int value) {
  int p = g.values[size_t(value)].producer;
  int64_t out = std::max<int64_t>(1, numel(g.values[size_t(value)].meta.shape)), in = 0;
  if (p < 0) return 1;
  for (int i : g.nodes[size_t(p)].inputs) in = std::max(in, numel(g.values[size_t(i)].meta.shape));
  return std::max<int64_t>(1, in / out);
}

// The row length of a row-wise op (softmax-like: output shaped like its input): its last dim.
int64_t row_length(const Graph& g, int value) {
  const Shape& s = g.values[size_t(value)].meta.shape;
  return s.empty() ? 1 : s.back();
}

void schedule_root(const Graph& g, const Region& r, const ScheduleRoot& root, const LoweredRegion& lowered) {
  Func f = root.func;
  f.compute_root();
  const Shape& shape = g.values[size_t(root.value)].meta.shape;
  std::vector<Var> v = pure_vars(f);
  Reduces kind = root.inner.empty() ? Reduces::nothing : reduction_kind(g, root.value);
  if (kind == Reduces::nothing) {
    pointwise(f, vector_lanes(g, r, root.value));
    for (Func inner : root.inner) on_one_thread(inner);  // no such op lowers on CUDA; kept off the host
    return;
  }
  if (kind == Reduces::columns) {
    pointwise(f, 1);
    for (Func inner : root.inner) column_reduction(inner, numel(shape), reduction_length(g, root.value));
    return;
  }
  if (v.empty()) {  // everything reduced; per-row reductions inside (cross_entropy): a thread per row
    f.gpu_single_thread();
    for (Func inner : root.inner) {
      if (inner.dimensions() == 0) full_reduction(inner, reduction_length(g, root.value));
      else column_reduction(inner, kFewColumns, 0);  // kept as is: no split
    }
    return;
  }
  int64_t work = reduction_length(g, root.value);
  bool row_wise = work == 1;  // the output keeps the row (softmax, layer_norm): the row is v[0]
  int64_t length = row_wise ? row_length(g, root.value) : work;
  std::vector<Var> rows(v.begin() + (row_wise ? 1 : 0), v.end());
  if (rows.empty()) {  // one row (a 1-D softmax): a block loop of (usually) one iteration
    Var block("block"), along("along");
    f.split(v[0], block, along, int(std::clamp<int64_t>(length, 1, INT32_MAX)), kGuard);
    v[0] = along;
    rows = {block};
  }
  if (length <= kThreadPerRowMax) {
    // One thread per row; a row-wise output's row loop runs inside the thread.
    Var bx("bx"), tx("tx");
    f.gpu_tile(fuse_all(f, rows), bx, tx, kThreads, kGuard);
    if (row_wise) f.reorder(v[0], tx, bx);
    for (Func inner : root.inner) inner.compute_at(f, tx);
    return;
  }
  Var row = fuse_all(f, rows);
  if (row_wise) {  // each thread writes 4 consecutive elements per step when the row allows
    Var co("co"), ci("ci"), ct("ct"), cv("cv");
    const int threads = row_tuning().threads;
    if (int lanes = vector_lanes(g, r, root.value); row_tuning().vector && lanes > 1 && length % lanes == 0) {
      f.split(v[0], co, ci, lanes * threads, kGuard).split(ci, ct, cv, lanes, kGuard).vectorize(cv);
      f.reorder(cv, ct, co, row).gpu_threads(ct);
    } else {
      f.split(v[0], co, ci, threads, kGuard).reorder(ci, co, row).gpu_threads(ci);
    }
  }
  f.gpu_blocks(row);
  for (Func inner : root.inner) block_reduction(inner, f, row);
  if (row_wise) stage_rows_in_shared_memory(root, lowered.inputs, row, length);
}

}  // namespace

std::string gpu_schedule_tuning() {
  const RowTuning& t = row_tuning();
  return "row_threads=" + std::to_string(t.threads) + ",row_stage=" + std::to_string(t.stage) +
         ",row_vector=" + std::to_string(t.vector);
}

void schedule_gpu(const Graph& g, const Region& r, LoweredRegion& lowered) {
  KILN_CHECK(lowered.gemms.empty(), "kiln GPU schedule: a GEMM was lowered into a CUDA pipeline");
  for (const ScheduleRoot& root : schedule_roots(r, lowered)) schedule_root(g, r, root, lowered);
}

}  // namespace kiln
