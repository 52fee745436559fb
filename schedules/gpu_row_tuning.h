// The GPU row schedule's tunables, read once from the KILN_GPU_ROW_* and KILN_GPU_WARP_* settings
// (dsl/settings.cpp lists them with their defaults; `kiln settings` prints them), for schedule
// experiments (`kiln bench gpu` with these set). schedules/gpu_schedule.cpp and gpu_reductions.cpp
// read them; gpu_schedule_tuning() (gpu_schedule.h) writes them into the disk cache's key.
#pragma once
#include <Halide.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "schedules/gpu_row_constants.h"
#include "schedules/gpu_warp_rows.h"

namespace kiln {

// Every split of the GPU schedule guards its tail: extents are rarely multiples of the factors.
inline const Halide::TailStrategy kGuard = Halide::TailStrategy::GuardWithIf;

struct RowTuning {
  int threads = gpu_rows::kThreads;
  bool stage = false;  // stage a block's row in shared memory
  bool registers = true;  // keep a row in registers: a warp row of static length in its lanes, a block row's unrolled steps
  bool host = true;  // compute per-row values that one row op reads in its rows (hosted_rows)
  bool vector = false;
  int warp = -1;  // 1: a warp per row always, 0: never, -1: by the rows' count and length
  int unroll = gpu_rows::kRowUnroll;  // a row reduction's serial steps unrolled by this: loads of several steps in flight
  int warp_rows = 0;  // rows per block (a warp each) of a warp-row op; 0: by the row length (warp_rows_per_block)
  int row_width = 0;  // lanes per row of a short warp-row op; 0: by the row length (row_width)
  warp_rows::LaneCombine combine = warp_rows::LaneCombine::vector;  // how a warp row's lanes are summed
  // A column reduction with few kept elements (gpu_reductions::column_reduction): the threads its
  // chunks of rows are sized for, the most rows a chunk, and the serial sum's unroll.
  int64_t column_threads = gpu_rows::kColumnThreads;
  int64_t column_chunk_max = gpu_rows::kColumnChunkMax;
  int column_unroll = gpu_rows::kColumnUnroll;
};

// One tunable of RowTuning: its directive in a region's schedule file (region_schedule.h), the
// setting that gives its default for every region, its range (0..1 for a flag) and what it sets.
// default_row_tuning() reads each from its setting; a schedule file's directives set them per
// region. (vector, row_width and combine are settings only.)
struct RowTunable {
  const char* directive;  // "gpu.row.threads"
  const char* setting;    // "KILN_GPU_ROW_THREADS"
  int64_t lo, hi;
  bool flag;  // read from its setting as a flag (1/0, true/false)
  int64_t (*get)(const RowTuning&);
  void (*set)(RowTuning&, int64_t);
  const char* what;
  std::vector<int64_t> search;  // the values `kiln tune` tries (region_tuner.h); none: not searched
};
const std::vector<RowTunable>& row_tunables();
// The tunable of this directive, or null.
const RowTunable* find_row_tunable(std::string_view directive);

// The tunables the schedule of the region being scheduled on this thread uses: the region's own
// where its schedule file gives them (a RowTuningScope, region_schedule.h), else the settings'.
const RowTuning& row_tuning();
// The settings' tunables, for every region without a schedule of its own.
const RowTuning& default_row_tuning();
// Sets this thread's tunables (null: the settings') and returns the previous; RowTuningScope's.
const RowTuning* exchange_row_tuning(const RowTuning* t);

}  // namespace kiln
