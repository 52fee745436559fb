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

const RowTuning& default_row_tuning() {
  static const RowTuning t = [] {
    RowTuning r;
    r.threads = int(int_setting("KILN_GPU_ROW_THREADS", gpu_rows::kThreads, warp_rows::kWarp, 1024));
    r.stage = flag_setting("KILN_GPU_ROW_STAGE", false);
    r.registers = flag_setting("KILN_GPU_ROW_REGISTERS", true);
    r.host = flag_setting("KILN_GPU_ROW_HOST", true);
    r.vector = flag_setting("KILN_GPU_ROW_VECTOR", false);
    r.warp = int(int_setting("KILN_GPU_ROW_WARP", -1, -1, 1));
    r.unroll = int(int_setting("KILN_GPU_ROW_UNROLL", gpu_rows::kRowUnroll, 1, 16));
    r.warp_rows = int(int_setting("KILN_GPU_WARP_ROWS", 0, 0, 32));
    r.row_width = int(int_setting("KILN_GPU_ROW_WIDTH", 0, 0, warp_rows::kWarp));
    if (r.row_width != 0 && (r.row_width & (r.row_width - 1)) != 0)
      throw_error("KILN_GPU_ROW_WIDTH: lanes per row must be a power of two from 1 to 32, got ", r.row_width);
    r.combine = flag_setting("KILN_GPU_WARP_COMBINE_SERIAL", false) ? warp_rows::LaneCombine::serial
                                                                   : warp_rows::LaneCombine::vector;
    r.column_threads = int_setting("KILN_GPU_COLUMN_THREADS", gpu_rows::kColumnThreads, 1024, int64_t(1) << 24);
    r.column_chunk_max = int_setting("KILN_GPU_COLUMN_CHUNK_MAX", gpu_rows::kColumnChunkMax, gpu_rows::kColumnChunkMin, 65536);
    r.column_unroll = int(int_setting("KILN_GPU_COLUMN_UNROLL", gpu_rows::kColumnUnroll, 1, 16));
    return r;
  }();
  return t;
}

}  // namespace kiln
