// The GPU schedule's measured constants that the compiled regions' schedule
// (schedules/gpu_schedule.cpp) and the eager kernels the generators build
// (generators/row_schedule.h) share, written once so that the two do not drift apart. Header-only,
// no Halide: the generator programs include it as they include gpu_warp_rows.h.
#pragma once
#include <cstdint>

namespace kiln::gpu_rows {

// Threads of a block: a block per row, a pointwise block, a column reduction's block.
inline constexpr int kThreads = 256;
// A thread's steps along a row, unrolled: the loads of that many steps in flight together (a
// block per [50304] row reached 1.2 TB/s with one load in flight per thread on one H200).
inline constexpr int kRowUnroll = 8;
// Rows per block when a warp reduces each row. One H200, 2026-12-02, GB/s with 8 / 4 / 2 / 1:
// softmax [65536, 1024] 2461 / 2501 / 2532 / 2528, layer_norm [65536, 768] 2176 / 2212 / 2202 / 2525
// (2026-12-03, rows in registers: layer_norm 3834 with 8, 3839 with 1).
inline constexpr int kWarpRows = 1;
// A column reduction with few results and long columns is first summed in chunks of rows, sized
// so that about kColumnThreads threads sum them (fewer leave the loads' latency unhidden: an
// [8192, 768] bias gradient in chunks of 256 rows ran on 24576 threads), chunks of at least
// kColumnChunkMin rows.
// A chunk holds at most kColumnChunkMax rows; its serial sum is unrolled by kColumnUnroll (loads
// in flight together). Column sum of [8192, 3072] on one H100, 2026-12-06, of copy: unrolled by 8
// 0.83, by 16 0.86; 2^18 threads in chunks of at most 128 rows 0.83, 2^19 in chunks of 64 0.80.
inline constexpr int64_t kColumnThreads = 1 << 17;
inline constexpr int64_t kColumnChunkMin = 32;
inline constexpr int64_t kColumnChunkMax = 256;
inline constexpr int kColumnUnroll = 16;

}  // namespace kiln::gpu_rows
