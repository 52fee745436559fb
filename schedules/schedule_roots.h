// What a region's schedule places, whatever the device: each materialized Func (the region's
// outputs, the pure wrappers of reductions, values read more than once) with the value it holds
// and the reductions inside its definition (pure Funcs between them stay inlined), and how those
// reductions walk memory. schedules/cpu_schedule.cpp and gpu_schedule.cpp schedule them.
#pragma once
#include <vector>

#include "schedules/lower_region.h"

namespace kiln {

struct ScheduleRoot {
  Halide::Func func;
  int value = -1;
  std::vector<Halide::Func> inner;  // reductions computed for it (a GEMM's accumulator included)
  std::vector<Halide::Func> inlined;  // the pure Funcs between them, inlined into their readers
  // The dim (Halide's order, innermost 0) that a read across a layout follows: f(x, y, z) = g(z, x, y)
  // reads g along z (2); -1 when every read follows f's innermost dim.
  int transposed_dim = -1;
  Halide::Func read_across;  // the Func it reads so (when f calls it itself), and that Func's dim
  int read_across_dim = -1;  // f's innermost var walks
  // A row op inlined into this Func (LoweredRegion::fused_row_ops) whose reductions it computes
  // per row, or -1. The Func then keeps the row, as a softmax does.
  int fused_row_op = -1;
  // A reduction whose result this Func stores through pointwise ops and views of the reduced
  // shape (LoweredRegion::reduction_epilogues), or -1. The Func then has the reduced shape.
  int reduction = -1;
  // The other roots this one reads (their Funcs called by its Func, its reductions or the Funcs
  // inlined into them): indices into schedule_roots' result.
  std::vector<int> reads;
};

std::vector<ScheduleRoot> schedule_roots(const LoweredRegion& lowered);

// How the reductions inside the op that produces `value` walk memory: along its rows (the last
// dim, or everything), across them (a reduced dim other than the last), or not at all.
enum class Reduces { nothing, rows, columns };
Reduces reduction_kind(const Graph& g, int value);

// Elements of the producing op's input per element of `value` (the row length of a reduction;
// 1 for other values and empty results).
int64_t reduction_length(const Graph& g, int value);
// The row length of a row-wise op (softmax-like: output shaped like its input): its last dim.
int64_t row_length(const Graph& g, int value);

// The value whose op decides how root's reductions walk memory: the row op fused into it (its
// reader chain of pointwise ops, copies and views ends at this root: lower_region.cpp), the
// reduction it stores, else the root's own value.
int reducing_value(const ScheduleRoot& root);

// A cat along a dim whose pieces have static sizes, all multiples of `width` (their greatest
// common divisor), in at most kMaxCatChunks chunks. Both schedules split the dim into its chunks
// and unroll them, so that each copy of the loop body reads its own piece (the cat's select
// resolves) instead of every piece, clamped.
constexpr int64_t kMaxCatChunks = 8;
struct CatChunks {
  int dim = -1;        // Halide's dim (innermost 0)
  int64_t width = 0;   // 0: not a cat in whole chunks
  int64_t extent = 0;  // the cat's size along the dim
};
CatChunks cat_chunks(const Graph& g, int value);

// root's Func, its reductions and the pure Funcs inlined into them.
std::vector<Halide::Func> root_funcs(const ScheduleRoot& root);

// The pure vars of f, innermost first.
std::vector<Halide::Var> pure_vars(const Halide::Func& f);

}  // namespace kiln
