#include "schedules/gpu_schedule.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "dsl/error.h"
#include "dsl/shape.h"
#include "schedules/custom_schedule.h"
#include "schedules/gpu_hosted_rows.h"
#include "schedules/gpu_reductions.h"
#include "schedules/gpu_row_constants.h"
#include "schedules/gpu_row_staging.h"
#include "schedules/gpu_row_tuning.h"
#include "schedules/gpu_transpose.h"
#include "schedules/gpu_warp_rows.h"
#include "schedules/region_schedule.h"
#include "schedules/schedule_roots.h"

namespace kiln {

using namespace Halide;

namespace {

using gpu_rows::kThreads, gpu_rows::kWarpRows;
using gpu_reductions::block_reduction, gpu_reductions::column_reduction, gpu_reductions::full_reduction,
    gpu_reductions::kBlockFullMax, gpu_reductions::kFewColumns, gpu_reductions::on_one_thread,
    gpu_reductions::thread_per_point;
constexpr int kWarp = warp_rows::kWarp;
constexpr int64_t kThreadPerRowMax = 64;     // rows this short: one thread per row
constexpr int64_t kRowCacheMax = 6144;       // rows this long (24 KiB of f32) are staged in shared memory
constexpr int64_t kRegisterRowMax = 1024;    // warp rows this long are staged in registers (32 a lane)
constexpr int64_t kBlockRowRegisters = 16;   // a block row's elements a thread keeps in registers, at most
// Rows of at most kShortWarpRow elements: kShortRowWidth lanes a row (32 / kShortRowWidth rows
// share a warp, each lane holding 8 of a row's 64 elements), kShortWarpRows rows a block. A warp
// per row left each lane 2 elements and combined 32 lanes per reduction, 64 shuffles for 64
// elements; a block of one warp holds too little work to hide its loads' latency (at most 32
// blocks an SM). softmax [1M, 64] on one H200, GB/s: a warp a row with 1 / 2 / 4 / 8 / 16 rows a
// block 840 / 1317 / 1367 / 1337 / 1219 (2026-12-03); 4 rows a block with 32 / 16 / 8 / 4 lanes a
// row 1354 / 2987 / 3184 / 3157, 8 lanes with 4 / 8 / 16 / 32 rows a block 3184 / 3933 / 3983 /
// 3852, 4 lanes with 8 rows 3846 (2026-12-04, copy 4050).
constexpr int64_t kShortWarpRow = 64;
constexpr int kShortWarpRows = 16;
constexpr int kShortRowWidth = 8;
// A warp per row for rows this short (a block of 256 threads would idle), and for rows this long
// when there are many; a block per row between (one H200, 2026-12-02, softmax GB/s block -> warp:
// [1M, 64] 154 -> 570, [65536, 1024] 2035 -> 2496, [8192, 50304] 1202 -> 1856, [8192, 4096]
// 2636 -> 1597). Fewer blocks than rows, each taking its rows in turn so that a block's row stays
// in the L2 cache between its passes, did worse (one H100, 2026-12-06, softmax [8192, 50304] of
// copy: a warp a row 0.69, a block of 1024 a row 0.55, 132 such blocks 0.41, 264 of 512 0.61).
constexpr int64_t kWarpRowMax = 1024, kWarpRowMin = 16384, kWarpRowsMin = 2048;

// Rows per block of a warp-row op whose rows have `length` elements.
int warp_rows_per_block(int64_t length) {
  if (row_tuning().warp_rows > 0) return row_tuning().warp_rows;
  return length <= kShortWarpRow ? kShortWarpRows : kWarpRows;
}

// Lanes of each row of a warp-row op whose rows have `length` elements, `per_block` rows a block
// (block_rows): a warp's 32, or fewer for short rows, which then share a warp (32 / width rows a
// warp). A row alone in its block keeps the warp: a block of 8 threads would hide no latency.
int row_width(int64_t length, int per_block) {
  if (length > kShortWarpRow || per_block == 1) return kWarp;
  return row_tuning().row_width > 0 ? row_tuning().row_width : kShortRowWidth;
}

// Rows per block of a warp-row op whose blocks split a row dim of `extent` rows (0: not static):
// the most, up to warp_rows_per_block, that divide it and fill whole warps. The reductions are
// computed once per block for all of its rows, so a last block past the end (GuardWithIf guards
// the output only) would read rows that do not exist: softmax of [1000, 64] with 16 rows a block
// asked for 1008 rows. Halide's shuffles name the whole warp (shfl.sync with mask -1), which PTX
// leaves undefined where the mask names threads that do not exist, so a block's threads are whole
// warps (6 rows of 8 lanes made a block of 48 threads, its second warp half empty).
int block_rows(int64_t length, int64_t extent) {
  int n = warp_rows_per_block(length);
  if (extent <= 0) return 1;
  while (n > 1 && (extent % n != 0 || n * row_width(length, n) % kWarp != 0)) --n;
  return n;
}

using warp_rows::fuse_all;

// Steps a thread takes along a block's row of `length` elements when all of them are unrolled,
// in every pass over the row (its reductions' partial sums and the output): the passes then load
// the same addresses in the same registers, and LLVM keeps the first pass's loads for the later
// ones (the loads are of read-only inputs), so the row is read from memory once. 0 where the
// threads do not divide the row, or a thread's share would hold too many registers.
int row_steps_in_registers(int64_t length, int threads) {
  if (!row_tuning().registers || length % threads != 0 || length / threads > kBlockRowRegisters) return 0;
  return int(length / threads);
}

// Consecutive elements of `bytes` each per access: 16 bytes' worth (PTX's widest load or store),
// at most 4; 1 for 8-byte values: Halide 14 + LLVM 14's NVPTX backend crashed compiling
// arange(16) in i64 with 2 lanes (tests/schedules/test_gpu_schedule.cpp). 8 lanes for 2-byte
// values measured worse on one H200 (2026-12-04, GPT-2's bf16 step): Halide proves no 16-byte
// alignment through a head merge or a cat, so the 8 moved as scalar 2-byte accesses 16 bytes
// apart, and the head copy took 26.7 us against 8.6 (bf16 GELU gained 2 of 49 us); with 8 for
// 1-byte values a sum over a [1, 3, 7, 8] tensor's dims {0, 1, 3} gave wrong values (fuzz seed
// 1023).
int lanes_for_bytes(size_t bytes) { return bytes >= 8 ? 1 : int(std::min<size_t>(4, 16 / bytes)); }

// The most consecutive elements per access the region's widest value allows; with `row` > 0,
// only values walked along rows of that length count (their last dim is `row`): a cross
// entropy's i64 targets, one per row, do not narrow the loads of its f32 logits.
int access_lanes(const Graph& g, const Region& r, int64_t row = 0) {
  size_t widest = 1;
  auto count = [&](int v) {
    const Shape& s = g.values[size_t(v)].meta.shape;
    if (row == 0 || (!s.empty() && s.back() == row)) widest = std::max(widest, itemsize(g.values[size_t(v)].meta.dtype));
  };
  for (int n : r.nodes) {
    for (int v : g.nodes[size_t(n)].inputs) count(v);
    for (int v : g.nodes[size_t(n)].outputs) count(v);
  }
  return lanes_for_bytes(widest);
}

// Whether value u holds one element per row of `root`: as many elements as root has rows, and a
// last dim other than root's row length (a cross entropy's i64 targets [N], or [B, T], beside its
// [N, C] logits). Such a value is read once per row, never along it. (A value of that size
// reshaped to run along root's rows would be misjudged; no graph of the zoo or the fuzzer has one.)
bool one_per_row(const Graph& g, int u, int root) {
  const Shape &su = g.values[size_t(u)].meta.shape, &sr = g.values[size_t(root)].meta.shape;
  if (sr.size() < 2 || sr.back() <= 1 || su.empty()) return false;
  return numel(su) * sr.back() == numel(sr) && su.back() != sr.back();
}

// The values `value` is computed from in region r (itself included): its producer's inputs, theirs,
// and so on through the region's nodes.
std::set<int> computed_from(const Graph& g, const Region& r, int value) {
  std::set<int> from{value};
  for (auto n = r.nodes.rbegin(); n != r.nodes.rend(); ++n) {
    const GraphNode& node = g.nodes[size_t(*n)];
    if (std::any_of(node.outputs.begin(), node.outputs.end(), [&](int v) { return from.count(v) > 0; }))
      from.insert(node.inputs.begin(), node.inputs.end());
  }
  return from;
}

// Consecutive elements per thread for `value`: the most the widest value it is computed from
// allows (values one per row of it do not count), when its innermost dim is a static multiple of
// that, else 1. Only what the value is computed from: a copy of attention's v beside the masked
// softmax, in one region, is not narrowed by the mask's i64 aranges (1 lane: 53 us a layer on
// the H200 against 19 us with 4).
int vector_lanes(const Graph& g, const Region& r, int value) {
  size_t widest = 1;
  for (int u : computed_from(g, r, value))
    if (!one_per_row(g, u, value)) widest = std::max(widest, itemsize(g.values[size_t(u)].meta.dtype));
  int lanes = lanes_for_bytes(widest);
  const Value& val = g.values[size_t(value)];
  if (val.sym.empty() || lanes < 2) return 1;
  SymDim d = g.shape_env->canonical(val.sym.back());
  return d.is_static() && d.coeff >= lanes && d.coeff % lanes == 0 ? lanes : 1;
}

// One thread per point, `lanes` consecutive elements a thread. A cat in whole chunks
// (cat_chunks) runs its chunks inside each thread, unrolled: each copy reads its own piece. As
// one point per thread, every thread loaded all of the pieces (the select of the cat's clamped
// loads) and kept one: GPT-2's gradient of q, k and v merged into [8, 1024, 2304] read 3x its
// bytes (33 us a layer on one H200, torch.compile 18).
void pointwise(Func f, int lanes, CatChunks cat = {}) {
  std::vector<Var> v = pure_vars(f);
  if (v.empty()) {
    f.gpu_single_thread();
    return;
  }
  Var co("co");
  bool chunks = cat.width > 0 && (cat.dim != 0 || cat.width % lanes == 0);
  if (chunks) {
    Var ci("ci");
    f.bound(v[size_t(cat.dim)], 0, int(cat.extent)).split(v[size_t(cat.dim)], co, ci, int(cat.width), kGuard);
    v[size_t(cat.dim)] = ci;
  }
  std::vector<VarOrRVar> inside;  // each thread's own loops, innermost first
  if (lanes > 1) {
    Var xo("xo"), xi("xi");
    f.split(v[0], xo, xi, lanes, kGuard).vectorize(xi);
    v[0] = xo;
    inside.push_back(xi);
  }
  if (chunks) {
    inside.push_back(co);
    std::vector<VarOrRVar> order = inside;
    order.insert(order.end(), v.begin(), v.end());
    f.reorder(order).unroll(co);
  }
  thread_per_point(f, v);
}

// Whether the rows of `value` (its last dim) have one length for every call (not a dynamic dim).
bool static_row(const Graph& g, int value) {
  const Value& val = g.values[size_t(value)];
  return !val.sym.empty() && g.shape_env->canonical(val.sym.back()).is_static();
}

// The loops of x (a row of a block) as `threads` threads that each take `lanes` consecutive
// elements (one vector access) per step: x = (co * threads + ct) * lanes + cv, ct the thread, cv
// vectorized, co the thread's steps. `lanes` must divide the row; the guard of the last step
// then tests the scalar thread index. (A guard of a vectorized split, x split by
// lanes * threads and that by lanes, was dropped by Halide 14 on CUDA: a 768 row in steps of
// 4 x 256 read 1024 elements of its input, out of bounds on the last row: CUDA error 700.)
struct ThreadLoops {
  Var co, ct, cv;
};
ThreadLoops threads_of_lanes(Func f, Var x, int lanes, int threads) {
  ThreadLoops l{Var("co"), Var("ct"), Var("cv")};
  Var xo("xo");
  f.split(x, xo, l.cv, lanes, TailStrategy::RoundUp).split(xo, l.co, l.ct, threads, kGuard);
  if (lanes > 1) f.vectorize(l.cv);
  f.reorder(l.cv, l.ct, l.co).gpu_threads(l.ct);
  return l;
}

// A block-per-row op with KILN_GPU_ROW_STAGE=1: its row staged in shared memory
// (gpu_row_staging.h), each thread loading `lanes` consecutive elements (fewer where they do not
// divide the row, one where its length varies) of every lanes * threads. Off by default: until
// 2026-12-02 it never staged anything (it looked for the inputs among Func calls), so it is not
// measured yet.
void stage_block_row(const ScheduleRoot& root, const std::vector<ImageParam>& inputs,
                     const std::set<std::string>& shared, Var row, int64_t length, bool fixed_length) {
  if (length > kRowCacheMax || !row_tuning().stage) return;
  stage_inputs(root, inputs, shared, length, kStageBytes, [&](Func cached, int bytes) {
    int lanes = fixed_length ? lanes_for_bytes(size_t(bytes)) : 1;
    while (lanes > 1 && length % lanes != 0) lanes /= 2;
    cached.compute_at(root.func, row);
    threads_of_lanes(cached, cached.args()[0], lanes, row_tuning().threads);
  });
}

// Consecutive elements a lane reads per step of a warp's row of `width` lanes: up to 4 (16 bytes),
// fewer when the row is shorter than a step of its lanes; 1 for 8-byte values (see vector_lanes).
int warp_row_lanes(const Graph& g, const Region& r, int64_t length, int width) {
  int lanes = access_lanes(g, r, length);
  while (lanes > 1 && length < int64_t(width) * lanes) lanes /= 2;
  return lanes;
}

// Whether the reduction producing `value` has one extent for every call: the dims it reduces
// ("dims", all when empty) are static in its first input; without a "dims" attribute, every dim
// of every input.
bool static_reduction(const Graph& g, int value) {
  int p = g.values[size_t(value)].producer;
  if (p < 0) return false;
  const GraphNode& n = g.nodes[size_t(p)];
  auto is_static = [&](const SymDim& d) { return g.shape_env->canonical(d).is_static(); };
  if (!n.attrs.has("dims")) {
    for (int i : n.inputs)
      for (const SymDim& d : g.values[size_t(i)].sym)
        if (!is_static(d)) return false;
    return true;
  }
  const SymShape& in = g.values[size_t(n.inputs.at(0))].sym;
  for (int d : wrap_dims(n.op->name, n.attrs.get<std::vector<int64_t>>("dims"), int64_t(in.size())))
    if (!is_static(in[size_t(d)])) return false;
  return true;
}

// Lanes of a warp row's reduction partials (a vector of `lanes` partial sums a lane): only where
// the row is whole steps of width * lanes. Halide 14 drops the guard of a vectorized partial
// step past the row's end on CUDA (its loop partitioning takes the vector tail's predicate as
// true), so a row of 24 in steps of 16 summed 8 elements of the next row (CUDA fuzz seed 1023).
int warp_reduction_lanes(const Graph& g, int value, bool row_wise, int64_t length, int width, int lanes) {
  bool fixed = row_wise ? static_row(g, value) : static_reduction(g, value);
  return lanes > 1 && fixed && length % (int64_t(width) * lanes) == 0 ? lanes : 1;
}

// A warp-row op with KILN_GPU_ROW_STAGE=1: its block's kWarpRows rows staged in shared memory
// (gpu_row_staging.h) before its reductions are split, so that their partials read the staged
// copy too. Lane l holds elements l, l + 32, ...: scalar accesses without bank conflicts (4
// consecutive floats a lane conflicted 4 ways). Returns whether anything was staged.
bool stage_warp_rows(const ScheduleRoot& root, const std::vector<ImageParam>& inputs,
                     const std::set<std::string>& shared, Var block, int64_t length, int per_block) {
  if (root.func.dimensions() < 2) return false;
  return stage_inputs(root, inputs, shared, int64_t(per_block) * length, kStageBytes, [&](Func cached, int) {
    std::vector<Var> cv = cached.args();
    Var co("co"), lane("lane");
    cached.compute_at(root.func, block).split(cv[0], co, lane, kWarp, kGuard).reorder(co, lane, cv[1]);
    cached.gpu_threads(lane, cv[1]);
  });
}

// A warp-row op whose rows have one length, a multiple of the warp up to kRegisterRowMax, with
// its block's row of each input it reads in place held in the warp's registers (gpu_row_staging.h):
// lane l loads elements l, l + 32, ... once, in one unrolled pass, and the reductions and the
// output read them from there. Softmax's rows were read three times (max, sum, output) and
// reached about half of the copy bandwidth. Returns the steps of a lane along the row, or 0 when
// nothing was staged.
int stage_warp_row_in_registers(const Graph& g, const ScheduleRoot& root, const std::vector<ImageParam>& inputs,
                                const std::set<std::string>& shared, Var block, int64_t length, int per_block) {
  // Not a row op written with the pointwise value it reads (tuple_outputs.h): GPT-2's residual sum
  // and layer norm, [8192, 768] on one H200, took 36.9 us with the sum's row held in registers
  // (and 37 with its inputs' rows there) against 28.9 us reading the rows in each pass.
  if (!row_tuning().registers || root.func.dimensions() < 2 || per_block != 1 || root.func.outputs() > 1 ||
      !static_row(g, root.value) || length % kWarp != 0 || length > kRegisterRowMax)
    return 0;
  const int steps = int(length / kWarp);
  bool staged = stage_inputs(root, inputs, shared, length, kRegisterStageBytes, [&](Func cached, int) {
    std::vector<Var> cv = cached.args();
    Var co("co"), lane("lane");
    cached.compute_at(root.func, block).store_in(MemoryType::Register).bound_extent(cv[0], int(length));
    for (size_t k = 1; k < cv.size(); ++k) cached.bound_extent(cv[k], 1);  // the block's one row
    cached.split(cv[0], co, lane, kWarp).reorder(co, lane).unroll(co).gpu_lanes(lane);
  }, /*lower_rank_floats=*/true);
  return staged ? steps : 0;
}

// How a warp-row op's rows map onto blocks and lanes.
struct WarpRowLayout {
  size_t first = 0;   // the row var the blocks split (rows[first]; the ones before are always 1)
  int per_block = 1;  // rows a block (block_rows)
  int width = kWarp;  // lanes a row (row_width)
};

// Blocks of kWarpRows along the innermost row dim that is not always 1 (a row sum kept as
// [8, 1024, 1] walks its rows in the middle dim), by the other row dims fused (within a block
// they are one point: fused with the innermost, bounds inference would widen g's rows to the
// whole dim and launch a block of thousands of threads). `row_vars`: the root's pure vars that
// are not the row (all of them for a row reduction), innermost first.
WarpRowLayout warp_row_layout(const Graph& g, const ScheduleRoot& root, size_t row_vars, bool row_wise, int64_t length) {
  const SymShape& sym = g.values[size_t(root.value)].sym;
  auto dim_of = [&](size_t k) {  // rows[k]'s dim of the shape (outermost first); -1 past the shape
    return int64_t(sym.size()) - 1 - int64_t(k + (row_wise ? 1 : 0));
  };
  auto always_one = [&](size_t k) {
    int64_t d = dim_of(k);
    return d >= 0 && g.shape_env->canonical(sym[size_t(d)]) == SymDim::constant(1);
  };
  WarpRowLayout l;
  while (l.first + 1 < row_vars && always_one(l.first)) ++l.first;
  const int64_t d = dim_of(l.first);
  const int64_t extent = d >= 0 && g.shape_env->canonical(sym[size_t(d)]).is_static()
                             ? g.values[size_t(root.value)].meta.shape[size_t(d)]
                             : 0;  // not static: block_rows keeps a row a block
  l.per_block = block_rows(length, extent);
  l.width = row_width(length, l.per_block);
  return l;
}

// A row-wise op or a row reduction with a warp per row and kWarpRows rows per block
// (schedules/gpu_warp_rows.h), laid out by `layout` (warp_row_layout): a row reduction's value is
// written by lane 0.
void warp_rows(const Graph& g, const Region& r, const ScheduleRoot& root, const LoweredRegion& lowered,
               const std::set<std::string>& shared, std::vector<Var> v, bool row_wise, int64_t length,
               const WarpRowLayout& layout, const Hosted& hosted) {
  Func f = root.func;
  std::vector<Var> rows(v.begin() + (row_wise ? 1 : 0), v.end());
  const size_t first = layout.first;
  const int per_block = layout.per_block, width = layout.width;
  Var rb("rb"), ry("ry");
  f.split(rows[first], rb, ry, per_block, kGuard);
  std::vector<Var> outer(rows.begin() + long(first) + 1, rows.end());  // the size-1 dims inside stay loops of one
  // The row in registers (every step of a lane unrolled: a register has a constant index), else
  // optionally in shared memory, else read from memory by each pass.
  int register_steps = row_wise ? stage_warp_row_in_registers(g, root, lowered.inputs, shared, rb, length, per_block) : 0;
  bool staged = register_steps > 0 || (row_wise && row_tuning().stage && static_row(g, root.value) &&
                                       stage_warp_rows(root, lowered.inputs, shared, rb, length, per_block));
  int lanes = staged ? 1 : warp_row_lanes(g, r, length, width);
  int unroll = register_steps > 0 ? register_steps : row_tuning().unroll;
  if (register_steps > 0) f.bound(v[0], 0, int(length));  // constant loops: registers have constant indices
  if (row_wise) {
    warp_rows::row_wise_lanes(f, v[0], ry, rb, lanes, unroll, width);
  } else {
    Var fl("fl");
    f.split(ry, ry, fl, 1, TailStrategy::RoundUp).gpu_threads(fl, ry);
  }
  if (outer.empty()) f.gpu_blocks(rb);
  else f.gpu_blocks(rb, fuse_all(f, outer));
  const int reduce_lanes = warp_reduction_lanes(g, root.value, row_wise, length, width, lanes);
  for (Func inner : root.inner)
    warp_rows::warp_reduction(inner, f, rb, reduce_lanes, unroll, row_tuning().combine, width);
  for (const ScheduleRoot* h : hosted) {
    Func(h->func).compute_at(f, rb);
    const int h_lanes = warp_reduction_lanes(g, reducing_value(*h), false, length, width, lanes);
    for (Func inner : h->inner) warp_rows::warp_reduction(inner, f, rb, h_lanes, unroll, row_tuning().combine, width);
  }
}

// Whether a row op runs a warp per row (rows of at most kWarpRowMax, or many long rows) rather than a block.
// A row shorter than the lanes `layout` gives it is not, nor one whose last step along the row
// falls to one lane (33 elements on 32 lanes, 9 on 8): Halide 14 drops the lane loop of that step
// (its extent is 1) and issues the warp shuffles that read the lanes' partials in lane 0 alone,
// under a guard, so they wait for lanes that never arrive and the kernel never finishes (CUDA
// fuzz seed 1001: a mean over [1, 1]; softmax of [6, 33] on an H100). A last step of several
// lanes keeps its loop ([997, 48] passes).
bool warp_per_row(const Graph& g, const Region& r, const ScheduleRoot& root, int64_t rows, int64_t length,
                  const WarpRowLayout& layout) {
  if (length < layout.width || length % layout.width == 1) return false;
  for (const Func& inner : root.inner)  // Halide 14 has no 64-bit warp shuffles
    for (const Type& t : inner.output_types())
      if (t.bits() > 32) return false;
  // Rows of 8-byte values; 8-byte values beside f32 rows (an attention mask's i64 positions) only
  // narrow the warp's loads to one element a lane.
  if (itemsize(g.values[size_t(root.value)].meta.dtype) >= 8) return false;
  if (row_tuning().warp >= 0) return row_tuning().warp == 1;
  return length <= kWarpRowMax || (length >= kWarpRowMin && rows >= kWarpRowsMin);
}

// `shared`: the Funcs that several roots compute (shared_funcs); `hosted`: the per-row roots to
// compute in root's rows (hosted_rows). Returns whether it placed them there: only a row-wise op a
// warp or a block per row does.
bool schedule_root(const Graph& g, const Region& r, const ScheduleRoot& root, const LoweredRegion& lowered,
                   const std::set<std::string>& shared, const Hosted& hosted = {}) {
  Func f = root.func;
  f.compute_root();
  if (custom_definition(g, root.value)) {  // a user's op: its reductions whole, then its output
    pointwise(f, 1);
    for (Func inner : root.inner) schedule_custom_inner_gpu(inner);
    return false;
  }
  const Shape& shape = g.values[size_t(root.value)].meta.shape;
  std::vector<Var> v = pure_vars(f);
  const int reducing = reducing_value(root);
  Reduces kind = root.inner.empty() ? Reduces::nothing : reduction_kind(g, reducing);
  if (kind == Reduces::nothing) {
    // A tile staged for a reader that another root inlines too (a transpose read by two outputs:
    // fuzz seed 1027) would be computed inside one root's loops and read by both.
    std::optional<AcrossRead> read = across_read(g, r, lowered, root);
    if (read && !shared.count(read->reader.name())) {
      transposed_tiles(root, *read);
      return false;
    }
    pointwise(f, vector_lanes(g, r, root.value), cat_chunks(g, root.value));
    for (Func inner : root.inner) on_one_thread(inner);  // no such op lowers on CUDA; kept off the host
    return false;
  }
  if (kind == Reduces::columns) {
    pointwise(f, 1);
    // The root stores a reduction (its own value, or through an epilogue): one thread per
    // element computes its sums. A softmax over columns reads them at every element instead,
    // so they are computed once, at the root of the pipeline; so are several sums that read one
    // another (logsumexp's max and sum of exps): split into chunks of rows, a later sum's chunks,
    // at the root, read the earlier sum.
    int p = g.values[size_t(reducing)].producer;
    bool stores_sums = p >= 0 && g.nodes[size_t(p)].op->schedule_class == ScheduleClass::reduction;
    bool in_threads = stores_sums && root.inner.size() == 1;
    for (Func inner : root.inner)
      column_reduction(inner, numel(shape), reduction_length(g, reducing), in_threads ? f : Func());
    return false;
  }
  if (v.empty()) {  // everything reduced
    bool full = std::all_of(root.inner.begin(), root.inner.end(), [](const Func& g) { return g.dimensions() == 0; });
    if (full && reduction_length(g, reducing) <= kBlockFullMax) {  // one block, as a row
      f.gpu_blocks(Var::outermost());
      for (Func inner : root.inner) block_reduction(inner, f, Var::outermost());
      return false;
    }
    // Partial sums over the grid; per-row reductions inside (cross_entropy): a thread per row.
    f.gpu_single_thread();
    for (Func inner : root.inner) {
      if (inner.dimensions() == 0) full_reduction(inner, reduction_length(g, reducing));
      else column_reduction(inner, kFewColumns, 0);  // kept as is: no split
    }
    return false;
  }
  int64_t work = root.fused_row_op >= 0 ? 1 : reduction_length(g, reducing);
  bool row_wise = work == 1;  // the output keeps the row (softmax, layer_norm): the row is v[0]
  int64_t length = row_wise ? row_length(g, root.value) : work;
  std::vector<Var> rows(v.begin() + (row_wise ? 1 : 0), v.end());
  if (rows.empty()) {  // one row (a 1-D softmax): a block loop of (usually) one iteration
    Var block("block"), along("along");
    f.split(v[0], block, along, int(std::clamp<int64_t>(length, 1, INT32_MAX)), kGuard);
    v[0] = along;
    rows = {block};
  }
  bool per_row = std::all_of(root.inner.begin(), root.inner.end(), [](const Func& g) { return g.dimensions() > 0; });
  const WarpRowLayout layout = warp_row_layout(g, root, rows.size(), row_wise, length);
  if (per_row && warp_per_row(g, r, root, numel(shape) / (row_wise ? length : 1), length, layout)) {
    warp_rows(g, r, root, lowered, shared, v, row_wise, length, layout, row_wise ? hosted : Hosted{});
    return row_wise;
  }
  if (length <= kThreadPerRowMax) {
    // One thread per row; a row-wise output's row loop runs inside the thread.
    Var bx("bx"), tx("tx");
    f.gpu_tile(fuse_all(f, rows), bx, tx, kThreads, kGuard);
    if (row_wise) f.reorder(v[0], tx, bx);
    for (Func inner : root.inner) inner.compute_at(f, tx);
    return false;
  }
  Var row = fuse_all(f, rows);
  const int threads = row_tuning().threads;
  const int steps = row_steps_in_registers(length, threads);
  if (row_wise) {  // each thread writes 4 consecutive elements per step when the row allows
    if (int lanes = vector_lanes(g, r, root.value); row_tuning().vector && lanes > 1 && length % lanes == 0) {
      ThreadLoops l = threads_of_lanes(f, v[0], lanes, threads);
      f.reorder(l.cv, l.ct, l.co, row);
    } else {
      Var co("co"), ci("ci");
      f.split(v[0], co, ci, threads, kGuard);
      if (steps > 0) f.reorder(co, ci, row).gpu_threads(ci).unroll(co);  // a thread's steps inside its loop: no barrier between
      else f.reorder(ci, co, row).gpu_threads(ci);
    }
  }
  f.gpu_blocks(row);
  const int unroll = steps > 0 ? steps : row_tuning().unroll;
  for (Func inner : root.inner) block_reduction(inner, f, row, unroll);
  if (row_wise) stage_block_row(root, lowered.inputs, shared, row, length, static_row(g, root.value));
  if (!row_wise) return false;
  for (const ScheduleRoot* h : hosted) {
    Func(h->func).compute_at(f, row);
    for (Func inner : h->inner) block_reduction(inner, f, row, unroll);
  }
  return true;
}

}  // namespace

std::string gpu_schedule_tuning() {
  const RowTuning& t = default_row_tuning();
  return "row_threads=" + std::to_string(t.threads) + ",row_stage=" + std::to_string(t.stage) +
         ",row_vector=" + std::to_string(t.vector) + ",row_warp=" + std::to_string(t.warp) +
         ",row_unroll=" + std::to_string(t.unroll) + ",warp_rows=" + std::to_string(t.warp_rows) + ",row_width=" + std::to_string(t.row_width) +
         ",row_registers=" + std::to_string(t.registers) + ",row_host=" + std::to_string(t.host) +
         ",warp_combine=" + (t.combine == warp_rows::LaneCombine::vector ? "vector" : "serial") +
         ",column_threads=" + std::to_string(t.column_threads) + ",column_chunk_max=" + std::to_string(t.column_chunk_max) +
         ",column_unroll=" + std::to_string(t.column_unroll);
}

void schedule_gpu(const Graph& g, const Region& r, LoweredRegion& lowered, const RowTuning& tuning) {
  KILN_CHECK(lowered.gemms.empty(), "kiln GPU schedule: a GEMM was lowered into a CUDA pipeline");
  RowTuningScope scope(tuning);
  std::vector<ScheduleRoot> roots = schedule_roots(lowered);
  std::set<std::string> shared = shared_funcs(roots);
  std::vector<Hosted> hosted = row_tuning().host ? hosted_rows(g, r, roots) : std::vector<Hosted>(roots.size());
  std::set<const ScheduleRoot*> guests;
  for (const Hosted& h : hosted) guests.insert(h.begin(), h.end());
  for (size_t k = 0; k < roots.size(); ++k) {
    if (guests.count(&roots[k])) continue;
    if (schedule_root(g, r, roots[k], lowered, shared, hosted[k])) continue;
    for (const ScheduleRoot* h : hosted[k]) schedule_root(g, r, *h, lowered, shared);  // not placed in k's rows
  }
}

}  // namespace kiln
