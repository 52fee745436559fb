#include "schedules/cpu_schedule.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "dsl/error.h"
#include "dsl/parallel_grain.h"
#include "schedules/custom_schedule.h"
#include "schedules/jit_target.h"
#include "schedules/schedule_roots.h"
#include "schedules/weight_packing.h"

namespace kiln {

using namespace Halide;

namespace {

// Transposing Funcs: tiles of CpuTuning::transpose_tile (64 where a dim is shorter), blocks of 8 x 8.
constexpr int kMinTile = 64, kBlock = 8;

int native_lanes(const Func& f) { return jit_target().natural_vector_size(f.output_types()[0]); }
// The vector width the schedule uses: native vectors, or several (cpu.vector.scale).
int vector_lanes(const Func& f, const CpuTuning& t) { return native_lanes(f) * t.vector_scale; }

// A row reduction: split into vector partial results (many independent accumulators instead of
// one chain), combined at the end. Reductions Halide cannot prove associative stay serial.
void vector_partials(Func f, const CpuTuning& t) {
  if (f.rvars().size() != 1 || f.num_update_definitions() != 1) return;
  int lanes = t.partials * vector_lanes(f, t);
  try {
    RVar ro("ro"), ri("ri");
    Var u("u");
    Func partials = f.update().split(f.rvars()[0], ro, ri, lanes, TailStrategy::GuardWithIf).rfactor(ri, u);
    // Per row (f's innermost var), so the partials are one dense vector, not a strided slab.
    partials.compute_at(f, f.args().empty() ? Var::outermost() : f.args()[0]).vectorize(u, lanes);
    partials.update().vectorize(u, lanes);
    // The partials' final sum as one horizontal vector reduction, not `lanes` scalar steps.
    f.update().atomic().vectorize(ri);
  } catch (const CompileError&) {
  }
}

// A column reduction: the reduction loop outside, the innermost kept dim vectorized inside it,
// so every step reads dense vectors.
void vector_columns(Func f, const CpuTuning& t) {
  std::vector<Var> v = pure_vars(f);
  if (v.empty()) return;
  int lanes = vector_lanes(f, t);
  std::vector<VarOrRVar> order{v[0]};
  for (const RVar& r : f.rvars()) order.push_back(r);
  for (size_t i = 1; i < v.size(); ++i) order.push_back(v[i]);
  f.vectorize(v[0], lanes, TailStrategy::GuardWithIf);
  for (int u = 0; u < f.num_update_definitions(); ++u)
    f.update(u).reorder(order).vectorize(v[0], lanes, TailStrategy::GuardWithIf);
}

// A column reduction computed once for all rows (softmax along dim 0 reads it for every row):
// tasks of CpuTuning::columns_per_task columns in parallel, the reduction loop outside the (wide)
// vector.
void column_reduction_root(Func g, const CpuTuning& t) {
  g.compute_root();
  std::vector<Var> v = pure_vars(g);
  if (v.empty()) return;
  int lanes = vector_lanes(g, t);
  g.vectorize(v[0], lanes, TailStrategy::GuardWithIf);
  for (int u = 0; u < g.num_update_definitions(); ++u) {
    Var xo("xo"), xi("xi");
    std::vector<VarOrRVar> order{xi};
    for (const RVar& r : g.rvars(u)) order.push_back(r);
    order.push_back(xo);
    for (size_t i = 1; i < v.size(); ++i) order.push_back(v[i]);
    Stage s = g.update(u);
    s.split(v[0], xo, xi, t.columns_per_task, TailStrategy::GuardWithIf).reorder(order).vectorize(xi);
    // The tasks are every column tile of every outer kept index: a parallel loop inside the outer
    // dims would start a parallel job per outer index ([4, 2048, 512] summed over dim 0: 2048).
    VarOrRVar tasks = xo;
    for (size_t i = 1; i < v.size(); ++i) {
      Var fused("t" + std::to_string(i));
      s.fuse(tasks.var, v[i], fused);
      tasks = fused;
    }
    if (t.parallel) s.parallel(tasks);
  }
}

// A materialized Func (pure: lower_region wraps reductions) in tasks of about t.task_elements
// units of work (an element of a reduction's result costs the elements it reads), in parallel
// when there is more than one; its innermost dim vectorized. The reductions of its definition
// are computed per outer row (row reductions; column ones when the result is 1-D, per tile of
// columns) or once for all rows (column reductions read by every row). A pointwise Func that
// reads values across their layout (a transpose: its innermost dim and the dim `transposed_dim`
// the read follows) runs in tiles of those two dims, of 8 x 8 blocks: the source block loaded as
// 8 dense rows and transposed in registers (x.t().contiguous() on 2048 x 2048: 4.0 ms with 1-D
// vectors, 1.6 ms with 8 x 8 blocks of strided loads, less with the block in registers). A cat
// in whole chunks unrolls its chunks (cat_chunks). A Func computed over one of its inputs
// (`overwrites`, in_place.h) never takes the tiles: a tile shifted inwards at an edge computes
// some elements twice, the second time from the input it has already overwritten.
void schedule_root(const ScheduleRoot& root, const Shape& shape, Reduces reduces, int64_t work, CatChunks cat,
                   bool overwrites, const CpuTuning& tuning) {
  Func f = root.func;
  const std::vector<Func>& inner = root.inner;
  f.compute_root();
  std::vector<Var> v = pure_vars(f);
  int R = int(v.size());
  if (R == 0) {
    for (Func g : inner) {
      g.compute_root();
      if (reduces == Reduces::rows) vector_partials(g, tuning);
    }
    return;
  }
  int lanes = vector_lanes(f, tuning);
  Shape loop_extent(shape.rbegin(), shape.rend());  // per Halide dim: what its loop walks
  if (cat.width % lanes == 0 && cat.width > 0) {
    // A cat whose pieces are whole chunks along its dim: the chunks unrolled, so each copy of the
    // loop body reads its own piece (the cat's select resolves) instead of every piece, clamped.
    Var co("co"), ci("ci");
    f.bound(v[size_t(cat.dim)], 0, int(cat.extent))
        .split(v[size_t(cat.dim)], co, ci, int(cat.width), TailStrategy::GuardWithIf)
        .unroll(co);
    v[size_t(cat.dim)] = ci;
    loop_extent[size_t(cat.dim)] = cat.width;
  }
  // Task splits are at most the loop's extent (tasks of a loop shorter than a task: one task).
  // Halide 14 drops the guard of a split wider than a constant extent that is a multiple of the
  // vector width when a Func is computed at the split's outer var: a [96] row sum split by 819 and
  // vectorized by 16 wrote 52 vectors into its 96 elements; an unrolled cat chunk looped 16384
  // vectors in its 8 elements (fuzz seed 456).
  bool big = tuning.parallel && numel(shape) * work >= kParallelMinElements;
  Var to("to"), t("t");
  int td = root.transposed_dim;
  int64_t across = td > 0 ? std::min(loop_extent[0], loop_extent[size_t(td)]) : 0;  // the two tiled dims
  int tile = across >= tuning.transpose_tile ? tuning.transpose_tile : std::min(kMinTile, tuning.transpose_tile);
  if (td > 0 && reduces == Reduces::nothing && across >= tile && !overwrites) {
    // Tasks: the tiles along the transposed dim when there are enough of them (each over the
    // other dims), else the outermost other dim.
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    Var xii("xii"), yii("yii"), xio("xio"), yio("yio");
    bool tile_tasks = R == 2 || loop_extent[size_t(td)] >= 4 * tile;
    std::vector<VarOrRVar> order{xii, yii, xio, yio, xo};
    if (!tile_tasks) order.push_back(yo);
    for (int d = 1; d < R; ++d)
      if (d != td) order.push_back(v[size_t(d)]);
    if (tile_tasks) order.push_back(yo);
    // Tiles shift inwards at the edges (both dims are at least a tile): every block is a full
    // 8 x 8, whose source block the stores read from registers.
    f.tile(v[0], v[size_t(td)], xo, yo, xi, yi, tile, tile, TailStrategy::ShiftInwards)
        .tile(xi, yi, xio, yio, xii, yii, kBlock, kBlock, TailStrategy::ShiftInwards)
        .reorder(order);
    if (big) f.parallel(order.back().var);
    f.vectorize(xii).vectorize(yii);
    if (root.read_across.defined()) {
      // The source block loaded as 8 dense rows (vectors along its own innermost dim) into a
      // block the stores read transposed: one 64-lane shuffle in registers.
      Func block = Func(root.read_across).in(f);
      std::vector<Var> b = pure_vars(block);
      block.compute_at(f, xio).vectorize(b[0]).vectorize(b[size_t(root.read_across_dim)]);
    }
    return;
  }
  if (R >= 2) {
    int64_t row = numel(shape) / std::max<int64_t>(shape[0], 1) * work;
    int64_t rows_per_task =
        std::clamp<int64_t>(tuning.task_elements / std::max<int64_t>(row, 1), 1, std::max<int64_t>(shape[0], 1));
    f.split(v[R - 1], to, t, int(std::min<int64_t>(rows_per_task, INT32_MAX)), TailStrategy::GuardWithIf);
    if (big && shape[0] > rows_per_task) f.parallel(to);
  } else {
    int64_t tile = reduces == Reduces::columns ? 16 * lanes : std::max<int64_t>(lanes, tuning.task_elements / work);
    tile = std::min(tile, std::max<int64_t>(lanes, loop_extent[0]));
    // A tile that divides the extent where a multiple of the vector width does: Halide 14 wrote
    // past a [1536] column sum split by 1024 (its partial sums computed per tile) and vectorized
    // by 64 (cpu.vector.scale 4 on transformer_block's qkv bias gradient); 768 tiles it exactly.
    for (int64_t d = tile; loop_extent[0] % tile != 0 && d >= lanes; d -= lanes)
      if (loop_extent[0] % d == 0) tile = d;
    f.split(v[0], to, t, int(std::min<int64_t>(tile, INT32_MAX)), TailStrategy::GuardWithIf);
    if (big || (tuning.parallel && reduces == Reduces::columns)) f.parallel(to);
  }
  if (shape.back() >= lanes) {
    if (R >= 2) f.vectorize(v[0], lanes, TailStrategy::GuardWithIf);
    else f.vectorize(t, lanes, TailStrategy::GuardWithIf);
  }
  for (Func g : inner) {
    if (reduces == Reduces::columns && R >= 2) {
      column_reduction_root(g, tuning);
      continue;
    }
    g.compute_at(f, R >= 2 ? t : to);
    if (reduces == Reduces::rows) vector_partials(g, tuning);
    else if (reduces == Reduces::columns) vector_columns(g, tuning);
  }
}

// Whether every call of `callee` in `caller` reads it at the caller's own row: each index but the
// innermost a plain pure var of the caller (no offset, no constant, no var twice).
bool reads_own_rows(const Func& caller, const std::string& callee) {
  class Check : public Internal::IRVisitor {
   public:
    Check(const Func& c, const std::string& name) : name_(name) {
      for (const Var& v : c.args()) vars_.insert(v.name());
    }
    bool ok = true;

   private:
    using IRVisitor::visit;
    void visit(const Internal::Call* c) override {
      IRVisitor::visit(c);
      if (c->name != name_ || c->call_type != Internal::Call::Halide) return;
      std::set<std::string> seen;
      for (size_t k = 1; k < c->args.size(); ++k) {
        const Internal::Variable* v = c->args[k].as<Internal::Variable>();
        if (!v || !vars_.count(v->name) || !seen.insert(v->name).second) ok = false;
      }
    }
    std::set<std::string> vars_;
    const std::string& name_;
  } check(caller, callee);
  const Internal::Definition& init = caller.function().definition();
  for (const Expr& e : init.values()) e.accept(&check);
  for (const Internal::Definition& u : caller.function().updates()) {
    for (const Expr& e : u.values()) e.accept(&check);
    for (const Expr& e : u.args()) e.accept(&check);
  }
  return check.ok;
}

// Row fusion: a materialized row-shaped Func (a row op's result, a value a row op reads twice)
// that one other root alone reads, each of that root's rows from the same row of it, is computed
// a row at a time inside its reader's row loop instead of whole beforehand. A chain of row ops
// (norm_softmax: layer_norm, softmax, layer_norm, log_softmax) then keeps its intermediates one
// row each, in L1, where whole they went through memory. Per root: the root it is computed in, or
// -1. Not for outputs, GEMMs, transposes, column reductions, cats, ops computed in place or a
// user's Halide definitions.
std::vector<int> fused_rows(const Graph& g, const Region& r, const LoweredRegion& lowered,
                            const std::vector<ScheduleRoot>& roots, const std::set<std::string>& gemms) {
  std::vector<int> into(roots.size(), -1), readers(roots.size(), 0), reader(roots.size(), -1);
  for (size_t j = 0; j < roots.size(); ++j)
    for (int k : roots[j].reads) ++readers[size_t(k)], reader[size_t(k)] = int(j);
  auto row_shaped = [&](const ScheduleRoot& root) {
    const Shape& shape = g.values[size_t(root.value)].meta.shape;
    bool gemm = std::any_of(root.inner.begin(), root.inner.end(), [&](const Func& c) { return gemms.count(c.name()) > 0; });
    bool in_place = std::find(r.in_place.begin(), r.in_place.end(), root.value) != r.in_place.end();
    return shape.size() >= 2 && !gemm && !in_place && root.transposed_dim < 0 && root.reduction < 0 &&
           !custom_definition(g, root.value) && cat_chunks(g, root.value).width == 0 &&
           reduction_kind(g, reducing_value(root)) != Reduces::columns;
  };
  for (size_t k = lowered.outputs.size(); k < roots.size(); ++k) {
    int j = reader[k];
    if (readers[k] != 1 || j < 0 || !row_shaped(roots[k]) || !row_shaped(roots[size_t(j)])) continue;
    if (g.values[size_t(roots[k].value)].meta.shape != g.values[size_t(roots[size_t(j)].value)].meta.shape) continue;
    const std::string& name = roots[k].func.name();
    bool own_rows = true;
    for (const Func& c : root_funcs(roots[size_t(j)])) own_rows = own_rows && reads_own_rows(c, name);
    if (own_rows) into[k] = j;
  }
  return into;
}

// A root computed a row at a time in its reader's row loop (fused_rows): its row vectorized, its
// row reductions per row.
void schedule_fused_row(const ScheduleRoot& root, const Func& reader, const Var& reader_row, const CpuTuning& tuning) {
  Func f = root.func;
  std::vector<Var> v = pure_vars(f);
  f.compute_at(reader, reader_row).vectorize(v[0], vector_lanes(f, tuning), TailStrategy::GuardWithIf);
  for (Func g : root.inner) {
    g.compute_at(f, v.back());
    vector_partials(g, tuning);
  }
}

// A GEMM's tiles, computed in f (the matmul's value or the last op of its epilogue): tasks of
// 32-column panels in parallel; in each, tiles of MR rows by 32 columns whose accumulators stay
// in registers while k runs (acc), the epilogue applied to each tile as it is stored.
void schedule_gemm(Func f, Func acc, const CpuTuning& tuning) {
  std::vector<Var> v = pure_vars(f);  // d0 = n, d1 = m (a is 2-D: gemm_lowerable)
  int lanes = native_lanes(f);
  int rows = lanes >= 16 ? 8 : 2;  // 2*MR accumulators, plus b and a: 32 registers with AVX-512, 16 else
  Var p("p"), j("j"), mo("mo"), mi("mi");
  // Tasks: one panel each, all rows (at most 256: gemm_lowerable).
  f.compute_root()
      .split(v[0], p, j, kGemmPanel, TailStrategy::GuardWithIf)
      .split(v[1], mo, mi, rows, TailStrategy::GuardWithIf)
      .reorder(j, mi, mo, p)
      .vectorize(j, lanes)
      .unroll(j)
      .unroll(mi);
  if (tuning.parallel) f.parallel(p);
  std::vector<Var> a = pure_vars(acc);  // j, m, batch..., p
  acc.compute_at(f, mo).vectorize(a[0], lanes).unroll(a[0]).unroll(a[1]);
  acc.update().reorder(a[0], a[1], acc.rvars(0)[0]).vectorize(a[0], lanes).unroll(a[0]).unroll(a[1]);
}

}  // namespace

void schedule_cpu(const Graph& g, const Region& r, LoweredRegion& lowered, const CpuTuning& tuning) {
  std::set<std::string> gemms;
  for (const LoweredGemm& gemm : lowered.gemms) gemms.insert(gemm.acc.name());
  std::vector<ScheduleRoot> roots = schedule_roots(lowered);
  std::vector<int> into = tuning.fuse_rows ? fused_rows(g, r, lowered, roots, gemms) : std::vector<int>(roots.size(), -1);
  for (size_t k = 0; k < roots.size(); ++k) {
    ScheduleRoot& root = roots[k];
    if (into[k] >= 0) {
      // The reader's row loop: its own rows' var where it is fused too, else its task's row (t).
      int j = into[k];
      std::vector<Var> rv = pure_vars(roots[size_t(j)].func);
      schedule_fused_row(root, roots[size_t(j)].func, into[size_t(j)] >= 0 ? rv.back() : Var("t"), tuning);
      continue;
    }
    auto gemm = std::find_if(root.inner.begin(), root.inner.end(), [&](const Func& c) { return gemms.count(c.name()) > 0; });
    bool overwrites = std::find(r.in_place.begin(), r.in_place.end(), root.value) != r.in_place.end();
    if (gemm != root.inner.end()) {
      KILN_CHECK(root.inner.size() == 1, "kiln schedule: a GEMM's epilogue holds another reduction");
      schedule_gemm(root.func, *gemm, tuning);
    } else if (custom_definition(g, root.value)) {  // a user's op: its reductions whole, then its output
      ScheduleRoot output = root;
      output.inner.clear();
      schedule_root(output, g.values[size_t(root.value)].meta.shape, Reduces::nothing, 1, {}, overwrites, tuning);
      for (Func f : root.inner) schedule_custom_inner_cpu(f, tuning);
    } else {
      schedule_root(root, g.values[size_t(root.value)].meta.shape, reduction_kind(g, reducing_value(root)),
                    reduction_length(g, root.reduction >= 0 ? root.reduction : root.value), cat_chunks(g, root.value),
                    overwrites, tuning);
    }
  }
}

}  // namespace kiln
