#include "schedules/gpu_reductions.h"

#include <algorithm>
#include <string>

#include "schedules/schedule_roots.h"

namespace kiln::gpu_reductions {

using namespace Halide;
using gpu_rows::kColumnChunkMin, gpu_rows::kThreads;
using warp_rows::fuse_all;
constexpr int kWarp = warp_rows::kWarp;
constexpr int64_t kFullPartials = 1 << 16;  // threads of a full reduction's first pass

// One thread per point of `vars` (all of the stage's pure vars), kThreads per block.
void thread_per_point(Stage s, const std::vector<Var>& vars) {
  Var bx("bx"), tx(kPointThread);
  if (vars.empty()) {
    s.gpu_single_thread();
    return;
  }
  s.gpu_tile(fuse_all(s, vars), bx, tx, kThreads, kGuard);
}

// g computed per row inside a block of row_tuning().threads threads at loop `row` of f: per-thread partials
// (each thread strides the row), then kWarp partials, then one thread. Reductions Halide cannot
// split (not provably associative) run serially in one thread.
void block_reduction(Func g, Func f, Var row, int unroll) {
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
    warp_rows::unroll_steps(partials.update(), ro, unroll);
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

// A column reduction g, computed in the threads of its root f (one thread per kept element, its
// pure init and its serial sum in registers: one kernel, not one per stage), or at the root of
// the pipeline with a thread per kept element when f is undefined. With few kept elements and
// long reductions, chunks of rows first, sized so that about row_tuning().column_threads threads sum them
// (fewer threads leave the loads' latency unhidden: [8192, 768] in chunks of 256 rows ran on
// 24576 threads), each chunk's sum in one thread of a kernel of its own. Serial sums are unrolled.
void column_reduction(Func g, int64_t kept, int64_t length, Func f) {
  std::vector<Var> v = pure_vars(g);
  const RowTuning& t = row_tuning();
  auto unrolled = [&t](Stage s, const std::vector<RVar>& rvars) {
    if (rvars.size() != 1) return;
    const std::string& name = rvars[0].name();  // qualified ("r$3$x.ri") after an rfactor
    RVar r(name.substr(name.rfind('.') + 1)), ro("ru_o"), ri("ru_i");
    s.split(r, ro, ri, t.column_unroll, kGuard).unroll(ri);
  };
  int64_t chunk = kColumnChunkMin;
  while (chunk < t.column_chunk_max && kept * (length / chunk) > t.column_threads) chunk *= 2;
  bool split = g.num_update_definitions() == 1 && !g.rvars().empty() && kept < kFewColumns && length >= 4 * chunk;
  if (split) {
    try {
      RVar r = fuse_all(g.update(), g.rvars()), ro("ro"), ri("ri");
      Var p("p");
      Func chunks = g.update().split(r, ro, ri, int(chunk), kGuard).rfactor(ro, p);
      Func stored = chunks.in(g);  // the chunks' sums; each computed in its thread
      stored.compute_root();
      thread_per_point(stored, pure_vars(stored));
      chunks.compute_at(stored, Var(kPointThread));
      unrolled(chunks.update(), chunks.rvars(0));
    } catch (const Halide::Error&) {
    }
  }
  if (f.defined() && !pure_vars(f).empty()) {
    g.compute_at(f, Var(kPointThread));
  } else {
    g.compute_root();
    thread_per_point(g, v);
    for (int u = 0; u < g.num_update_definitions(); ++u) thread_per_point(g.update(u), v);
  }
  if (g.num_update_definitions() == 1) {
    try {
      unrolled(g.update(), g.rvars(0));
    } catch (const Halide::Error&) {
    }
  }
}

}  // namespace kiln::gpu_reductions
