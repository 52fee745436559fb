// The GPU schedule of reductions (schedules/gpu_schedule.cpp picks which): a row's reduction by
// the threads of a block, a full reduction over the grid in passes, a column reduction a thread
// per kept element (long columns first summed in chunks of rows), and the fallbacks that keep a
// Func on the GPU (one thread, a thread per point).
#pragma once
#include <Halide.h>

#include <cstdint>
#include <vector>

#include "schedules/gpu_row_tuning.h"

namespace kiln::gpu_reductions {

// Full reductions at most this long run in one block, as a row (split_long_reductions leaves the
// chunks' results of a large one: 8192 for 2^26 elements); longer ones over the grid in passes.
inline constexpr int64_t kBlockFullMax = 1 << 14;
// Column reductions with fewer outputs than this are first summed in chunks of rows.
inline constexpr int64_t kFewColumns = 1 << 17;
// thread_per_point's thread var: a Func computed at it runs inside each thread.
inline constexpr const char* kPointThread = "tx";

// One thread per point of `vars` (all of the stage's pure vars), gpu_rows::kThreads per block.
void thread_per_point(Halide::Stage s, const std::vector<Halide::Var>& vars);

// g computed per row inside a block of row_tuning().threads threads at loop `row` of f: per-thread
// partials (each thread strides the row, `unroll` steps in flight), then a warp's partials, then
// one thread. Reductions Halide cannot split (not provably associative) run serially in one thread.
void block_reduction(Halide::Func g, Halide::Func f, Halide::Var row, int unroll = row_tuning().unroll);

// A Func computed by one GPU thread: a fallback that keeps it off the host.
void on_one_thread(Halide::Func g);

// A full reduction g (0-d) of `length` elements: partial sums by up to 64K threads, then by a
// block, then one thread.
void full_reduction(Halide::Func g, int64_t length);

// A column reduction g with `kept` results of `length` elements each, computed in the threads of
// its root f (one thread per kept element: one kernel, not one per stage), or at the root of the
// pipeline with a thread per kept element when f is undefined; few kept elements with long
// columns are summed in chunks of rows first.
void column_reduction(Halide::Func g, int64_t kept, int64_t length, Halide::Func f = Halide::Func());

}  // namespace kiln::gpu_reductions
