// Inputs of a GPU row op staged on chip: a block loads the part of an input its rows read once
// (coalesced) into a wrapper Func, and every reader of the block reads the wrapper instead of
// global memory (softmax reads its row three times: max, sum of exp, output). The wrapper lives
// in shared memory, or, for a warp's row of static length, in the warp's registers (each lane
// holding every 32nd element). gpu_schedule.cpp places the wrapper (block-per-row or warp rows);
// this file decides which inputs can be staged and how many bytes fit.
#pragma once
#include <Halide.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "schedules/schedule_roots.h"

namespace kiln {

// Shared memory a block may stage inputs in: Halide 14's CUDA runtime does not raise a kernel's
// limit above the default 48 KiB (a launch over it fails with CUDA_ERROR_INVALID_VALUE).
inline constexpr int64_t kStageBytes = 32 << 10;
// Registers a warp may stage its row in: 8 KiB is 64 registers of 4 bytes a lane (a 1024-wide
// row of two f32 inputs, as softmax's backward reads), of the 255 a thread may have.
inline constexpr int64_t kRegisterStageBytes = 8 << 10;

// The names of the Funcs that belong to more than one root (a pure Func inlined into two
// outputs): a wrapper computed inside one root's loops would not exist in the other's.
std::set<std::string> shared_funcs(const std::vector<ScheduleRoot>& roots);

// Wraps each input of root's rank that root's Funcs read only at their own point (f(x, y) reads
// p(x, y)) and that no other root reads through a shared Func, while `elements` elements of each
// (what one block needs) fit in `max_bytes` in all; `place` schedules each wrapper (given the
// input's element size). With `lower_rank_floats`, floating-point inputs of lower rank (at least
// 1-d) read at the readers' leading vars are wrapped too: a layer_norm's weight and bias (a block
// of one row needs one row of them; their other dims, if any, have extent 1 in the block). An
// attention's boolean mask is not: staged beside the scores, its row slowed GPT-2's masked
// softmax from 264 to 275 us on one H200. Inputs Halide refuses to wrap stay as they are. Returns
// whether any input was staged.
bool stage_inputs(const ScheduleRoot& root, const std::vector<Halide::ImageParam>& inputs,
                  const std::set<std::string>& shared, int64_t elements, int64_t max_bytes,
                  const std::function<void(Halide::Func, int)>& place, bool lower_rank_floats = false);

}  // namespace kiln
