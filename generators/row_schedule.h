// The schedule of the eager kernels that reduce along rows (reductions, softmax, log_softmax,
// layer_norm): the output is produced tile by tile of rows, and every per-row Func of the pipeline
// (each reduction: a Func with an update over a one-dim RDom; for the row-wise ops also the pure
// per-row values such as logsumexp) is computed at the loop `t` of that tile. The layout of the
// canonical 2-D form picks one specialize() branch, tried in order:
//   full    (reductions: at most 16 rows, each long and dense): chunks of a row run in parallel,
//           each summed into vector partials, so a full reduction uses every core;
//   columns (reductions: rows adjacent, a long reduction): blocks of whole memory rows run in
//           parallel, each streaming into its own partial results, combined once at the end;
//   inner   (a row's elements adjacent): tasks of whole rows, each reduction rfactored into
//           4 x vector-width partial results, the row-wise output vectorized along the row;
//   outer   (rows adjacent): tiles of up to 32 vectors of rows, vectorized across rows with the
//           reduction loop outside, so every step reads dense vectors;
//   generic: serial loops.
// Parallel loops only run for tensors of kParallelMinElements or more and more than one task, so
// small inputs never touch the thread pool (a one-element op stays around a microsecond).
#pragma once
#include <optional>
#include <vector>

#include "dsl/halide_def.h"
#include "dsl/parallel_grain.h"
#include "schedules/gpu_row_constants.h"
#include "schedules/gpu_warp_rows.h"

namespace kiln {

inline constexpr int kFullChunk = 1 << 15;
inline constexpr int kMaxColumns = 1 << 14;

struct RowLayout {
  Halide::Var row;                   // the output's var over rows
  std::optional<Halide::Var> along;  // the output's var along a row (row-wise ops only)
  Halide::Expr rows, length;         // number of rows, elements per row
  Halide::Expr along_dense;          // a row's elements are adjacent in every buffer
  Halide::Expr across_dense;         // consecutive rows are adjacent in every buffer
  bool split_reductions = false;     // the reduce family: split long reductions across cores
  bool materialize_pure = false;     // also compute pure per-row Funcs once per row
  int vector = 8;                    // natural vector lanes of the compute type
};

// The per-row Funcs `out` depends on: reductions, and pure 1-D Funcs when asked.
inline std::vector<Halide::Func> per_row_funcs(const Halide::Func& out, bool pure_too) {
  std::vector<Halide::Func> fs;
  for (const auto& [name, f] : Halide::Internal::find_transitive_calls(out.function())) {
    if (name == out.name() || f.dimensions() != 1) continue;
    if (f.has_update_definition() || pure_too) fs.push_back(Halide::Func(f));
  }
  return fs;
}

// When `dense` holds, splits the reduction `f` (one RVar) into `lanes` vector partial results,
// computed at `at`, that f then combines: many independent accumulators instead of one chain.
inline void vector_partials(Halide::Func f, Halide::Expr dense, Halide::LoopLevel at, int lanes) {
  using namespace Halide;
  RVar ro("ro"), ri("ri");
  Var u("u");
  Func partials = f.update().specialize(dense).split(f.rvars()[0], ro, ri, lanes, TailStrategy::GuardWithIf).rfactor(ri, u);
  partials.compute_at(at).vectorize(u, lanes);
  partials.update().vectorize(u, lanes);
}

inline void schedule_rows(Halide::Func out, const RowLayout& L) {
  using namespace Halide;
  const int V = L.vector, lanes = 4 * V;
  // Tiles of rows: up to 32 vectors, and whole vectors when there are fewer rows than that.
  Expr tile = clamp(L.rows / V * V, V, 32 * V);
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Expr big = cast(Int(64), L.rows) * L.length >= kParallelMinElements;
  Expr rows_per_task = max(1, kElementsPerTask / max(L.length, 1));
  Expr full = L.split_reductions && L.rows <= 16 && L.length >= 4 * kFullChunk && L.along_dense;
  // Blocks of at least 16 memory rows and kElementsPerTask elements, at most 64 of them.
  Expr column_chunk = max(16, L.length / 64, (kElementsPerTask + L.rows - 1) / max(L.rows, 1));
  Expr columns = L.split_reductions && L.across_dense && L.rows <= kMaxColumns && L.length >= 2 * column_chunk;
  Var to("to"), t("t"), ti("ti");

  // Every branch has the loop t, where the per-row Funcs are computed.
  auto whole_rows = [&](Stage s, bool vectorized, bool parallel) {
    s.split(L.row, to, t, rows_per_task, guard);
    if (vectorized && L.along) s.vectorize(*L.along, V, guard);
    if (parallel) s.parallel(to);
  };
  auto row_tiles = [&](Stage s, bool parallel) {
    s.split(L.row, t, ti, tile, guard);
    if (L.along) s.reorder(ti, *L.along, t);
    s.vectorize(ti, V, guard);
    if (parallel) s.parallel(t);
  };
  if (L.split_reductions) {
    out.specialize(full).split(L.row, to, t, 16, guard);
    out.specialize(columns).split(L.row, t, ti, L.rows, guard).vectorize(ti, V, guard);
  }
  // Parallel loops only where there is more than one task.
  Expr many_tasks = big && L.rows > rows_per_task, many_tiles = big && L.rows > tile;
  whole_rows(out.specialize(L.along_dense && many_tasks), true, true);
  whole_rows(out.specialize(L.along_dense), true, false);
  row_tiles(out.specialize(L.across_dense && many_tiles), true);
  row_tiles(out.specialize(L.across_dense), false);
  whole_rows(out.specialize(many_tasks), false, true);
  whole_rows(out, false, false);

  for (Func f : per_row_funcs(out, L.materialize_pure)) {
    f.compute_at(out, t);
    Var k = f.args()[0];
    f.specialize(L.across_dense).vectorize(k, V, guard);
    if (!f.has_update_definition()) continue;
    RVar r = f.rvars()[0];
    if (L.split_reductions) {
      // One long row: chunks in parallel, each into vector partials.
      RVar ro("ro"), ri("ri"), rio("rio"), rii("rii");
      Var p("p"), u("u");
      Func chunks = f.update().specialize(full).split(r, ro, ri, kFullChunk, guard).rfactor(ro, p);
      chunks.compute_at(out, t);
      Func partials = chunks.update().split(ri, rio, rii, lanes, guard).rfactor(rii, u);
      partials.compute_at(chunks, p).vectorize(u, lanes);
      partials.update().vectorize(u, lanes);
      chunks.update().parallel(p);
      // Columns: blocks of whole memory rows in parallel, each streaming into its own partial
      // results, combined once per column.
      Stage combine = f.update().specialize(columns);
      RVar co("co"), ci("ci");
      Var q("q");
      Func blocks = combine.split(r, co, ci, column_chunk, guard).rfactor(co, q);
      combine.reorder(k, co).vectorize(k, V, guard);
      blocks.compute_at(out, t).vectorize(blocks.args()[0], V, guard);
      blocks.update().reorder(blocks.args()[0], ci, q).vectorize(blocks.args()[0], V, guard).parallel(q);
    }
    vector_partials(f, L.along_dense, LoopLevel(out, t), lanes);
    f.update().specialize(L.across_dense).reorder(k, r).vectorize(k, V, guard);
  }
}

// The CUDA schedule of the same kernels: one block per row, kGpuThreads threads. Each thread
// walks the row with stride kGpuThreads (neighbouring threads read neighbouring elements when the
// row is dense), reductions are rfactored into one partial result per thread in shared memory
// and combined by a warp and then one thread, and the row-wise output is written by all threads; pure per-row
// Funcs (a row's value) are computed by all threads too, and 1-D inputs (layer_norm's weight)
// are read where they are used. Rows laid out
// across memory (column reductions) are correct but read uncoalesced: the compiled path, which
// knows the layout, schedules those as thread-per-row.
inline constexpr int kGpuThreads = gpu_rows::kThreads;
inline constexpr int kGpuWarp = warp_rows::kWarp;
inline constexpr int kGpuUnroll = gpu_rows::kRowUnroll;

inline void schedule_rows_gpu(Halide::Func out, const RowLayout& L) {
  using namespace Halide;
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Var co("co"), ci("ci");
  if (L.along) out.split(*L.along, co, ci, kGpuThreads, guard).reorder(ci, co, L.row).gpu_threads(ci);
  out.gpu_blocks(L.row);
  for (Func f : per_row_funcs(out, L.materialize_pure)) {
    if (!f.has_update_definition()) {  // a row's value: all threads
      // A 1-D input read as it is (layer_norm's weight and bias) stays inlined: staged per block in
      // shared memory, f64 weight and bias of 4096 took 64 KB and the launch failed.
      bool reads_a_reduction = false;
      for (const auto& [name, callee] : Internal::find_transitive_calls(f.function()))
        reads_a_reduction = reads_a_reduction || callee.has_update_definition();
      if (!reads_a_reduction) continue;
      f.compute_at(out, L.row);
      Var o("o"), i("i");
      f.split(f.args()[0], o, i, kGpuThreads, guard).gpu_threads(i);
      continue;
    }
    f.compute_at(out, L.row);
    RVar ro("ro"), ri("ri"), rio("rio"), rii("rii");
    Var u("u"), w("w");
    Func partials = f.update().split(f.rvars()[0], ro, ri, kGpuThreads, guard).rfactor(ri, u);
    partials.compute_at(out, L.row).gpu_threads(u);
    partials.update().reorder(ro, u).gpu_threads(u);
    warp_rows::unroll_steps(partials.update(), ro, kGpuUnroll);
    // The kGpuThreads partials are summed by a warp (each thread kGpuThreads / kGpuWarp of them)
    // and then by one thread: one thread summing all of them took three quarters of a 1024-wide
    // softmax's time (517 GB/s against the compiled block schedule's 2035 on one H200).
    Func warp = f.update().split(ri, rio, rii, kGpuWarp, guard).rfactor(rii, w);
    warp.compute_at(out, L.row).gpu_threads(w);
    warp.update().reorder(rio, w).gpu_threads(w);
  }
}

// CUDA, the "columns" kernels: a reduction whose rows lie across memory (its results adjacent: a
// bias gradient summed over B*T rows). A thread per (result, chunk of rows) sums its chunk, so
// neighbouring threads read neighbouring elements, with about kGpuColumnThreads threads in all;
// then a thread per result adds up its chunks. The block-per-row schedule read such rows one
// element per 32-byte sector.
inline constexpr int kGpuColumnThreads = int(gpu_rows::kColumnThreads);
inline constexpr int kGpuColumnChunkMin = int(gpu_rows::kColumnChunkMin);

inline void schedule_columns_gpu(Halide::Func out, const RowLayout& L) {
  using namespace Halide;
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Var bx("bx"), tx("tx");
  out.gpu_tile(L.row, bx, tx, kGpuThreads, guard);
  Expr chunks = clamp(kGpuColumnThreads / max(L.rows, 1), 1, max(L.length / kGpuColumnChunkMin, 1));
  Expr chunk = (L.length + chunks - 1) / chunks;
  for (Func f : per_row_funcs(out, false)) {
    f.compute_at(out, tx);
    RVar ro("ro"), ri("ri");
    Var q("q"), k = f.args()[0], kb("kb"), kt("kt");
    Func part = f.update().split(f.rvars()[0], ro, ri, chunk, guard).rfactor(ro, q);
    part.compute_root().split(k, kb, kt, kGpuThreads, guard).gpu_blocks(kb, q).gpu_threads(kt);
    part.update().split(k, kb, kt, kGpuThreads, guard).reorder(ri, kt, kb, q).gpu_blocks(kb, q).gpu_threads(kt);
  }
}

// CUDA, the "warp" kernels of the row-wise ops: a warp per row, kGpuWarpRows rows per block
// (schedules/gpu_warp_rows.h, the compiled regions' schedule for rows up to 1024 long). A block
// of 256 threads per row idles most of its threads on short rows (a [98304, 1024] softmax: 1276
// GB/s against the compiled warp rows' 2472 on one H200). Lanes read one element at a time: the
// kernel does not know whether rows start 16-byte aligned. Pure per-row values are inlined.
inline constexpr int kGpuWarpRows = gpu_rows::kWarpRows;

// A 2-D input as the warp kernels read it: rows clamped to the last one. A block's reductions are
// computed for all kGpuWarpRows rows of the block, also past the last row of a partial block.
inline Halide::Func clamped_rows(const Halide::Func& in, const Halide::Expr& rows) {
  using namespace Halide;
  Var x("x"), n("n");
  Func c(in.name() + "_rows_clamped");
  c(x, n) = in(x, min(n, rows - 1));
  return c;
}

inline void schedule_rows_gpu_warp(Halide::Func out, const RowLayout& L) {
  using namespace Halide;
  Var rb("rb"), ry("ry");
  out.split(L.row, rb, ry, kGpuWarpRows, TailStrategy::GuardWithIf);
  warp_rows::row_wise_lanes(out, *L.along, ry, rb, 1);
  out.gpu_blocks(rb);
  for (Func f : per_row_funcs(out, false)) warp_rows::warp_reduction(f, out, rb, 1);
}

}  // namespace kiln
