// A pointwise output that reads an input across its layout (a transposed copy: out(x, y) =
// in(y, x) with in dense along y) on CUDA. Scheduled as any pointwise Func, a warp's 32 threads
// write 32 consecutive elements of the output but read 32 elements of the input a whole row
// apart: 32 memory transactions per warp load (908 GB/s for [8192, 3072] on one H200, a quarter
// of a copy). Here each block copies a 32 x 32 tile: its threads first load the input's tile into
// shared memory along the input's dense dim, then write the output along its own dense dim from
// there, so that both sides are coalesced. The shared tile is one column wider than the tile
// (33 floats a row), so that the column reads fall in 32 different banks.
#pragma once
#include <Halide.h>

#include <optional>

#include "schedules/lower_region.h"
#include "schedules/schedule_roots.h"

namespace kiln {

// An input that root reads across its layout, where a staged tile makes the read coalesced.
struct AcrossRead {
  Halide::ImageParam input;
  Halide::Func reader;  // the Func that reads it: root's, or one inlined into root
  int dense_arg = -1;  // the input's dim that is dense in memory (Halide's order)
  int inner_arg = -1;  // the input's dim that root's innermost dim walks
  int out_dim = -1;    // root's dim that walks the input's dense dim
};

// The first input root's Func reads across its layout by plain dims (each index of the read is
// one of root's vars, as a transpose or a permute reads), if any. Strides of the inputs are those
// traced (lower_region.cpp keeps a traced layout for every call).
std::optional<AcrossRead> across_read(const Graph& g, const Region& r, const LoweredRegion& lowered,
                                      const ScheduleRoot& root);

// Schedules root's Func (pointwise, rank >= 2) as tiles of kTransposeTile x kTransposeTile, the
// input's tile staged in shared memory (see above).
void transposed_tiles(const ScheduleRoot& root, const AcrossRead& read);

}  // namespace kiln
