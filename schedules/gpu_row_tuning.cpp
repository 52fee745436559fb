#include "schedules/gpu_row_tuning.h"

#include <utility>

#include "dsl/error.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

thread_local const RowTuning* current = nullptr;

}  // namespace

const RowTuning& row_tuning() { return current ? *current : default_row_tuning(); }

const RowTuning* exchange_row_tuning(const RowTuning* t) { return std::exchange(current, t); }

const std::vector<RowTunable>& row_tunables() {
  using T = RowTuning;
  static const std::vector<RowTunable> table = {
      {"gpu.row.threads", "KILN_GPU_ROW_THREADS", warp_rows::kWarp, 1024, false,
       [](const T& t) { return int64_t(t.threads); }, [](T& t, int64_t v) { t.threads = int(v); },
       "threads per block of a row a block", {64, 128, 256, 512, 1024}},
      {"gpu.row.stage", "KILN_GPU_ROW_STAGE", 0, 1, true, [](const T& t) { return int64_t(t.stage); },
       [](T& t, int64_t v) { t.stage = v != 0; }, "1 stages a block's row in shared memory",
       // Searched since its rows split by the vector lanes exactly (threads_of_lanes in
       // gpu_schedule.cpp): before that, GPT-2's residual + layer_norm pair read past its rows on
       // an H100 (CUDA error 700); tests/cuda/test_tune.cpp ran every combination clean on an H100.
       {0, 1}},
      {"gpu.row.registers", "KILN_GPU_ROW_REGISTERS", 0, 1, true, [](const T& t) { return int64_t(t.registers); },
       [](T& t, int64_t v) { t.registers = v != 0; }, "0 keeps no row in registers", {0, 1}},
      {"gpu.row.host", "KILN_GPU_ROW_HOST", 0, 1, true, [](const T& t) { return int64_t(t.host); },
       [](T& t, int64_t v) { t.host = v != 0; }, "0 computes per-row values one row op reads in kernels of their own", {0, 1}},
      {"gpu.row.warp", "KILN_GPU_ROW_WARP", -1, 1, false, [](const T& t) { return int64_t(t.warp); },
       [](T& t, int64_t v) { t.warp = int(v); }, "1 a warp per row, 0 a block per row, -1 by the rows' count and length", {-1, 0, 1}},
      {"gpu.row.unroll", "KILN_GPU_ROW_UNROLL", 1, 16, false, [](const T& t) { return int64_t(t.unroll); },
       [](T& t, int64_t v) { t.unroll = int(v); }, "a row reduction's serial steps unrolled by this", {1, 2, 4, 8}},
      {"gpu.warp.rows", "KILN_GPU_WARP_ROWS", 0, 32, false, [](const T& t) { return int64_t(t.warp_rows); },
       [](T& t, int64_t v) { t.warp_rows = int(v); }, "rows a block of a warp-row op (0: by the row length)", {0, 1, 2, 4, 8}},
      {"gpu.column.threads", "KILN_GPU_COLUMN_THREADS", 1024, int64_t(1) << 24, false,
       [](const T& t) { return t.column_threads; }, [](T& t, int64_t v) { t.column_threads = v; },
       "threads a column reduction's chunks of rows are sized for", {1 << 15, 1 << 17, 1 << 19}},
      {"gpu.column.chunk_max", "KILN_GPU_COLUMN_CHUNK_MAX", gpu_rows::kColumnChunkMin, 65536, false,
       [](const T& t) { return t.column_chunk_max; }, [](T& t, int64_t v) { t.column_chunk_max = v; },
       "the most rows a column reduction's chunk", {64, 256, 1024}},
      {"gpu.column.unroll", "KILN_GPU_COLUMN_UNROLL", 1, 16, false, [](const T& t) { return int64_t(t.column_unroll); },
       [](T& t, int64_t v) { t.column_unroll = int(v); }, "a column reduction's serial sum unrolled by this", {1, 2, 4, 8}},
  };
  return table;
}

const RowTunable* find_row_tunable(std::string_view directive) {
  for (const RowTunable& t : row_tunables())
    if (directive == t.directive) return &t;
  return nullptr;
}

const RowTuning& default_row_tuning() {
  static const RowTuning t = [] {
    RowTuning r;  // its initializers are the defaults
    for (const RowTunable& u : row_tunables())
      u.set(r, u.flag ? int64_t(flag_setting(u.setting, u.get(r) != 0)) : int_setting(u.setting, u.get(r), u.lo, u.hi));
    r.vector = flag_setting("KILN_GPU_ROW_VECTOR", false);
    r.row_width = int(int_setting("KILN_GPU_ROW_WIDTH", 0, 0, warp_rows::kWarp));
    if (r.row_width != 0 && (r.row_width & (r.row_width - 1)) != 0)
      throw_error("KILN_GPU_ROW_WIDTH: lanes per row must be a power of two from 1 to 32, got ", r.row_width);
    r.combine = flag_setting("KILN_GPU_WARP_COMBINE_SERIAL", false) ? warp_rows::LaneCombine::serial
                                                                   : warp_rows::LaneCombine::vector;
    return r;
  }();
  return t;
}

}  // namespace kiln
