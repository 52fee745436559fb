// kiln's CUDA schedule for a lowered region. Every Func that is not inlined runs on the GPU
// (a stage left on the host would make Halide copy buffers back and forth):
//   pointwise   all dims fused, 256 threads per block, 4 consecutive elements per thread when
//               the innermost dim is a static multiple of 4 (16-byte accesses for f32);
//   row-wise    (softmax, layer_norm, a row's sum; also a row op fused into its pointwise reader):
//               rows of at most 1024 elements (attention's scores, layer norms), and many rows
//               of 16K or more (a vocabulary's logits): a warp per row, one row per block, each
//               lane summing 4 consecutive elements of every 128 in registers, the lanes
//               combined through warp shuffles (rows of at most 64: 8 lanes a row, 4 rows a
//               warp, up to 16 rows a block that divide the row count); a row of static length up to 1024 (a multiple
//               of 32) is first loaded into the warp's registers, every 32nd element a lane, so
//               each input is read once however many passes the op makes; other rows, and rows
//               of 8-byte values (Halide 14 has no 64-bit shuffles): one block per row, 256 threads striding the
//               row, each reduction rfactored into per-thread partials (256 -> 32 -> 1 in
//               shared memory);
//   columns     (a reduction over a dim other than the last): one thread per kept element,
//               looping over the reduced dims (neighbouring threads read neighbouring columns);
//               fewer than 128K columns with long reductions are first split into chunks of
//               32-256 rows, as many as keep about 128K threads busy (a [8192, 8192] column sum
//               ran on 32 blocks of threads looping 8192 times), each thread's sum unrolled 8x;
//               the final sums run in the threads of the Func that stores them (a bias
//               gradient's reshape), one kernel for the chunks and one for the rest;
//   full        (everything reduced to one value): a 64K-thread pass of partial sums, a 256-thread
//               pass, then one thread.
// Matmuls are not lowered on CUDA: they run as cuBLAS steps between pipelines.
#pragma once
#include <string>

#include "schedules/gpu_row_tuning.h"
#include "schedules/lower_region.h"

namespace kiln {

// `tuning`: the region's own tunables where it has a schedule file (region_schedule.h's
// row_tuning_of), else the settings'.
void schedule_gpu(const Graph& g, const Region& r, LoweredRegion& lowered,
                  const RowTuning& tuning = default_row_tuning());

// The row schedule's tunables, for schedule experiments (`kiln bench gpu` with these set), are
// the KILN_GPU_ROW_* and KILN_GPU_WARP_* settings (dsl/settings.cpp lists them with their
// defaults; `kiln settings` prints them; schedules/gpu_row_tuning.h reads them). Row staging:
// schedules/gpu_row_staging.h; lane combines: gpu_warp_rows.h; reductions: gpu_reductions.h.
// Their values as text, part of the disk cache's key of CUDA graphs.
std::string gpu_schedule_tuning();

}  // namespace kiln
