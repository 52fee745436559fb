// A warp per row on CUDA: the Halide schedule of a row op whose rows are short (up to a few
// thousand elements) or many, shared by the compiled regions (schedules/gpu_schedule.cpp) and the
// eager kernels that generators/ build (generators/row_schedule.h). Header-only and Halide-only,
// so that the generator programs need no more than kiln_defs.
//
//   block:  rows_per_block rows, `width` lanes each (threadIdx.y picks the row, threadIdx.x the
//           lane): a warp per row with the default width of 32; a short row takes fewer lanes,
//           and 32 / width rows share a warp (Halide shuffles within each row's lanes);
//   a row's reduction g: each lane sums `lanes` consecutive elements of every width * lanes in
//           registers (coalesced reads, no shared memory), then its vector; lane 0 combines the
//           row's lane sums through warp shuffles into g, which lives in shared memory for the
//           block: one at a time (LaneCombine::serial), or all shuffled at once and summed as a
//           vector, in a tree (LaneCombine::vector);
//   a row-wise output: each lane writes `lanes` consecutive elements of every width * lanes.
#pragma once
#include <Halide.h>

#include <vector>

namespace kiln::warp_rows {

inline constexpr int kWarp = 32;

// Fuses the (pure or reduction) vars of stage s, innermost first, into one loop and returns it.
template <typename V>
V fuse_all(Halide::Stage s, const std::vector<V>& vars) {
  V cur = vars.at(0);
  for (size_t i = 1; i < vars.size(); ++i) {
    V next(cur.name() + "_" + vars[i].name());
    s.fuse(cur, vars[i], next);
    cur = next;
  }
  return cur;
}

inline std::vector<Halide::Var> args_of(const Halide::Func& f) {
  std::vector<Halide::Var> v;
  for (const Halide::Var& a : f.args()) v.push_back(a);
  return v;
}

// A thread's serial steps `r` of a partial reduction, unrolled by `unroll`: the loads of that many
// steps are in flight together instead of one (a block per [50304] row reached 1.2 TB/s with one
// load in flight per thread on one H200).
inline void unroll_steps(Halide::Stage s, Halide::RVar r, int unroll) {
  if (unroll <= 1) return;
  Halide::RVar ro(r.name() + "_o"), ri(r.name() + "_i");
  s.split(r, ro, ri, unroll, Halide::TailStrategy::GuardWithIf).unroll(ri);
}

// How lane 0 combines the lanes' partial sums of a row. serial: a loop of `width` steps, each a
// shuffle from one lane and an update of g in shared memory. vector: the shuffles issued together
// and reduced as one vector (a tree of depth 5 for 32 lanes), g updated once (Halide's atomic()
// vectorized reduction; the update is lane 0's alone, so the atomic never waits).
enum class LaneCombine { serial, vector };

// Reduction g of a row, computed at loop `block` of f by the row's `width` lanes (see above). g's
// rows run on threadIdx.y and a one-wide threadIdx.x, so that the partials' lane loop
// (threadIdx.x) nests inside them. `unroll` > 1 unrolls each lane's steps (loads of several steps
// in flight). Reductions Halide cannot split (not provably associative) run serially in lane 0.
inline void warp_reduction(Halide::Func g, Halide::Func f, Halide::Var block, int lanes, int unroll = 1,
                           LaneCombine combine = LaneCombine::serial, int width = kWarp) {
  using namespace Halide;
  const TailStrategy guard = TailStrategy::GuardWithIf;
  g.compute_at(f, block);
  std::vector<Var> gv = args_of(g);
  Var gy("gy"), gl("gl");
  auto rows_on_warps = [&](Stage s) {  // g's innermost row dim; outer ones (one row, mostly) loop
    s.split(gv.at(0), gy, gl, 1, TailStrategy::RoundUp).gpu_threads(gl, gy);
  };
  rows_on_warps(g);
  for (int u = 0; u < g.num_update_definitions(); ++u) {
    if (u > 0 || g.rvars().empty()) {
      rows_on_warps(g.update(u));
      continue;
    }
    // partials(lane, lv) sums the row's elements lane * lanes + lv of every width * lanes; each
    // lane's vector is summed in the lane (lane_sums) before lane 0 reads the lanes' sums.
    Func partials, lane_sums;
    Var lane("lane"), lv("lv"), ls("ls");
    RVar ro("ro"), ri("ri"), rl("rl"), rv("rv");
    try {
      RVar r = fuse_all(g.update(), g.rvars());
      partials = g.update().split(r, ro, ri, width * lanes, guard).split(ri, rl, rv, lanes, guard).rfactor({{rl, lane}, {rv, lv}});
      if (lanes > 1) lane_sums = g.update().rfactor(rl, ls);
    } catch (const CompileError&) {
    }
    rows_on_warps(g.update());
    if (!partials.defined()) continue;
    partials.compute_at(g, gy).gpu_lanes(lane);
    partials.update().reorder(lv, ro, lane).gpu_lanes(lane);
    unroll_steps(partials.update(), ro, unroll);
    if (lanes > 1) {
      partials.vectorize(lv);
      partials.update().vectorize(lv);
    }
    if (lane_sums.defined()) {
      lane_sums.compute_at(g, gy).gpu_lanes(ls);
      lane_sums.update().gpu_lanes(ls);
    }
    // g's update now reduces over rl, the lanes (rfactor proved it associative).
    if (combine == LaneCombine::vector) g.update().atomic().vectorize(rl);
  }
}

// The loops of a row-wise output f along its row var `along` (rows already split, the row within
// the block `ry`, the block `rb`): lane l of `width` writes `lanes` consecutive elements of every
// width * lanes, threadIdx.y picks the row.
inline void row_wise_lanes(Halide::Func f, Halide::Var along, Halide::Var ry, Halide::Var rb, int lanes, int unroll = 1,
                           int width = kWarp) {
  using namespace Halide;
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Var co("co"), ci("ci"), lane("lane"), cv("cv");
  f.split(along, co, ci, width * lanes, guard).split(ci, lane, cv, lanes, guard).reorder(cv, co, lane, ry, rb);
  if (lanes > 1) f.vectorize(cv);
  if (unroll > 1) {
    Var coo("coo"), coi("coi");
    f.split(co, coo, coi, unroll, guard).unroll(coi);
  }
  f.gpu_lanes(lane).gpu_threads(ry);
}

}  // namespace kiln::warp_rows
