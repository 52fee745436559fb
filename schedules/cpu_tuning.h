// The CPU schedule's tunables (schedules/cpu_schedule.cpp): the defaults, each measured where the
// initializer below says, and a region's own values from its schedule file (region_schedule.h),
// one directive a line:
//
//   cpu.task.elements 262144     units of work a parallel task
//   cpu.parallel 0               every loop of the region serial
//
// region_schedule_directives() lists them with their ranges. They are the choices schedule_cpu
// already made with constants; a schedule with every directive at its default is kiln's schedule.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "dsl/parallel_grain.h"

namespace kiln {

struct CpuTuning {
  int64_t task_elements = kElementsPerTask;  // a parallel task's units of work (an element of a reduction's result counts what it reads)
  bool parallel = true;                      // false: every loop serial
  int vector_scale = 1;                      // vectors this many native vectors wide (the rest unrolled)
  int partials = 4;                          // a row reduction's accumulators, in vectors
  // Transposing Funcs: tiles of this edge where both tiled dims are at least as long, else 64.
  // Measured on x.permute(2, 0, 1).contiguous() of [4, 256, 2048] f32: 64-wide tiles 0.46 ms, 128
  // 0.33, 256 0.33 (longer runs of stores per output row), 32 0.91.
  int transpose_tile = 128;
  // A column reduction's task, in columns: 8 AVX-512 vectors (measured: 64 to 256 alike, 1.8-1.9
  // ms on softmax(2048², 0); one vector per task 2.9 ms).
  int columns_per_task = 128;
  // A row op's intermediate that one row op alone reads, row by row, computed a row at a time in
  // its reader's row loop (cpu_schedule.cpp: fused_rows) instead of whole beforehand.
  bool fuse_rows = true;
};

// One tunable: its directive, range (0..1 for a flag) and what it sets.
struct CpuTunable {
  const char* directive;  // "cpu.task.elements"
  int64_t lo, hi;
  int64_t (*get)(const CpuTuning&);
  void (*set)(CpuTuning&, int64_t);
  const char* what;
  std::vector<int64_t> search;  // the values `kiln tune` tries (region_tuner.h)
};
const std::vector<CpuTunable>& cpu_tunables();
// The tunable of this directive, or null.
const CpuTunable* find_cpu_tunable(std::string_view directive);

}  // namespace kiln
