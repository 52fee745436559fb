#include "schedules/lower_region.h"

#include <algorithm>
#include <array>
#include <set>

#include "dsl/error.h"
#include "schedules/schedule_roots.h"
#include "schedules/tuple_outputs.h"
#include "schedules/view_index.h"
#include "schedules/weight_packing.h"

namespace kiln {

using namespace Halide;

DType widened(DType t) {
  if (t == DType::f16 || t == DType::bf16) return DType::f32;
  if (t == DType::bool_) return DType::i32;
  return t;
}

namespace {

Expr convert(Expr stored, DType from, DType to) {
  return from == to ? stored : store_value(load_value(stored, from), to);
}

// "exp_12" (appended: g++ 12 warns falsely on "literal" + string chains).
std::string named(const std::string& prefix, int v) {
  std::string out = prefix;
  out += '_';
  out += std::to_string(v);
  return out;
}

class Lowering {
 public:
  Lowering(const Graph& g, const Region& r) : g_(g), r_(r) {}

  LoweredRegion run() {
    for (int s : r_.symbols) out_.symbols.emplace(s, Param<int32_t>(named("s", s)));
    for (int n : r_.nodes)
      has_gemm_ = has_gemm_ || (g_.nodes[size_t(n)].op->gemm && gemm_lowerable(g_, g_.nodes[size_t(n)]));
    for (size_t k = 0; k < r_.inputs.size(); ++k) lower_input(r_.inputs[k], int(k));
    for (int n : r_.nodes)
      for (int v : g_.nodes[n].inputs) {
        ++uses_[v];
        reader_[v] = n;
      }
    for (int n : r_.nodes) {
      const GraphNode& node = g_.nodes[n];
      lower_node(node);
      if (node.op->gemm) continue;  // lower_matmul decides
      // A pointwise value read twice is computed once, into a Func its readers call; others are
      // one expression with their readers (a chain of pointwise ops is a single Expr). An output
      // computed in place over one of the region's inputs (in_place.h) is read back from where it
      // was stored: recomputed, it would read the input it overwrote.
      // At rank 0 every pointwise value is its own stage too: one element costs nothing, and
      // Halide 14's simplifier blows up on nested f64 sin/cos inlined into one scalar expression.
      int v = node.outputs[0];
      bool in_place = std::find(r_.in_place.begin(), r_.in_place.end(), v) != r_.in_place.end();
      bool scalar = g_.values[size_t(v)].meta.shape.empty() && uses_[v] > 0;
      // An argmax reads its input twice (its max, then the first index holding it); the scan over
      // the region's readers runs only for an elementwise value read once.
      bool shared = is_elementwise(node) &&
                    (scalar || uses_[v] + (in_place ? 1 : 0) > 1 || compared_with_its_reduction(v)) &&
                    (scalar || !recomputed(node));
      if (int end = fused_chain_end(node); end >= 0) {
        out_.fused_row_ops[out_.values.at(v).func.name()] = v;
        if (readers_of(end) > 0) stored_first_.insert(end);  // read again here: its readers load it
      } else if (int end = epilogue_end(node); end >= 0) {
        out_.reduction_epilogues[end] = v;
        stored_first_.insert(end);
      } else if (stored_first_.count(v)) {
        out_.materialized.push_back(func_of(v).func);
        stored_.insert(v);
      } else if (!is_pointwise(node) && node.op->schedule_class != ScheduleClass::view &&
                 node.op->schedule_class != ScheduleClass::creation &&
                 node.op->schedule_class != ScheduleClass::gather) {  // a gather: one load an element, inlined
        out_.materialized.push_back(out_.values.at(node.outputs[0]).func);
        stored_.insert(v);
      } else if (shared) {
        out_.materialized.push_back(func_of(node.outputs[0]).func);
        stored_.insert(v);
      }
    }
    for (LoweredGemm& gemm : out_.gemms) out_.materialized.push_back(func_of(gemm.root).func);
    for (int v : r_.outputs) func_of(v);
    // Outputs are the values' own Funcs, except where two outputs share one or an output is an
    // input: a pipeline needs distinct output Funcs, so those get a copy.
    std::set<std::string> taken;
    for (const ImageParam& p : out_.inputs) taken.insert(p.name() + "_f");
    for (int v : r_.outputs) {
      const HalideTensor& t = out_.values.at(v);
      if (taken.insert(t.func.name()).second) {
        out_.outputs.push_back(t.func);
        continue;
      }
      std::vector<Var> vars = halide_vars(t.rank());
      Func o(named("out", v));
      o(vars) = t.func(vars);
      out_.outputs.push_back(o);
    }
    // Tensors start at index 0: with the outputs' mins known, Halide proves a tile's vector of
    // indices does not cross a row of the tensor it reads (a flattened [4, 256, C] value read by
    // 8-wide tiles: i % 256 of a ramp stays a ramp, a dense load instead of a gather).
    // An output is always a new dense tensor of the value's shape, or an input's tensor of that
    // shape that is dense (halide_backend.cpp, memory_for): its extents and strides are the shape's,
    // constants where the dims are static. Halide then folds a fused loop's index arithmetic
    // (without them, a transposed copy of GPT-2's heads divided by runtime extents five times a
    // thread and loaded its 4 floats one by one, under a tail guard).
    for (size_t k = 0; k < out_.outputs.size(); ++k) set_dense_shape(out_.outputs[k].output_buffer(), shape_of(r_.outputs[k]));
    out_.output_values = r_.outputs;
    compute_outputs_together(g_, r_, out_);
    return std::move(out_);
  }

 private:
  // The stored value of v at `args` (innermost first): a call of its Func, or its expression.
  Expr at(int v, const std::vector<Expr>& args) {
    auto f = out_.values.find(v);
    if (f != out_.values.end()) return f->second.func(args);
    return expr_of_.at(v)(args);
  }

  // v as a Func (made on first need: an op's definition reads Funcs, and outputs are Funcs).
  const HalideTensor& func_of(int v) {
    auto f = out_.values.find(v);
    if (f != out_.values.end()) return f->second;
    const Value& val = g_.values[size_t(v)];
    std::vector<Var> vars = halide_vars(int(val.meta.shape.size()));
    Func fn(names_.at(v));
    fn(vars) = Internal::common_subexpression_elimination(at(v, std::vector<Expr>(vars.begin(), vars.end())));
    return out_.values[v] = {fn, shape_of(v), val.meta.dtype};
  }

  void define_expr(int v, std::string name, std::function<Expr(const std::vector<Expr>&)> fn) {
    names_[v] = std::move(name);
    expr_of_[v] = std::move(fn);
  }

  Expr dim_expr(const SymDim& raw) {
    SymDim d = g_.shape_env->canonical(raw);
    KILN_CHECK(!d.opaque, "halide backend: dim ", d.str(), " has no formula");
    Expr e = Expr(int32_t(d.coeff));
    for (int s : d.syms) {
      auto it = out_.symbols.find(s);
      KILN_CHECK(it != out_.symbols.end(), "halide backend: symbol s", s, " is not among the region's symbols");
      e = Internal::is_const_one(e) ? Expr(it->second) : e * it->second;
    }
    return e;
  }

  std::vector<Expr> shape_of(int v) {
    std::vector<Expr> s;
    for (const SymDim& d : g_.values[v].sym) s.push_back(dim_expr(d));
    return s;
  }


  void lower_input(int v, int k) {
    if (std::find(r_.packed.begin(), r_.packed.end(), v) != r_.packed.end()) {
      lower_packed_input(v, k);
      return;
    }
    const Value& val = g_.values[v];
    int rank = int(val.meta.shape.size());
    ImageParam p(halide_type(val.meta.dtype), rank, named("in", k));
    // A dense innermost dim (as traced; guards and the eager kernels keep it so) gets dense vector
    // loads; any other layout is read through its strides.
    if (rank > 0) p.dim(0).set_stride(val.strides.back() == 1 && val.meta.shape.back() != 1 ? Expr(1) : Expr());
    if (rank > 1 && val.strides.back() != 1 && val.meta.shape.back() != 1) out_.transposed_inputs.insert(p.name());
    std::vector<Expr> shape = shape_of(v);
    for (int d = 0; d < rank; ++d) {
      int h = rank - 1 - d;
      p.dim(h).set_min(0);
      if (g_.values[v].sym[d].is_static()) p.dim(h).set_extent(shape[d]);
    }
    std::vector<Var> vars = halide_vars(rank);
    Func f(named("in", k) + "_f");
    f(vars) = p(vars);
    out_.inputs.push_back(p);
    out_.values[v] = {f, shape, val.meta.dtype};
  }

  // A weight packed in 32-column panels (weight_packing.h): f32 [ceil(N/32), K, 32], dense.
  void lower_packed_input(int v, int k) {
    const Shape& kn = g_.values[v].meta.shape;
    ImageParam p(Float(32), 3, named("packed", k));
    int64_t panels = panel_shape(kn)[0];
    p.dim(0).set_bounds(0, kGemmPanel).set_stride(1);
    p.dim(1).set_bounds(0, int32_t(kn[0])).set_stride(kGemmPanel);
    p.dim(2).set_bounds(0, int32_t(panels)).set_stride(int32_t(kn[0] * kGemmPanel));
    out_.inputs.push_back(p);
    packed_[v] = p;
  }

  // The matmul's pointwise epilogue: from its value, the chain of single readers that are
  // pointwise ops of the same shape inside the region; the last of them (or the matmul's value)
  // is where the GEMM's tiles are computed.
  int epilogue_root(int v) {
    while (!is_output(v) && uses_[v] == 1) {
      const GraphNode& reader = g_.nodes[size_t(reader_.at(v))];
      int out = reader.outputs[0];
      if (!is_elementwise(reader) || g_.values[size_t(out)].sym != g_.values[size_t(v)].sym)
        break;
      v = out;
    }
    return v;
  }

  // out[..., m, n] = sum_k a[..., m, k] * b[k, n], b read from its packed panels. a's rows are
  // clamped, so the 8-row tiles of the schedule never read past its last row.
  void lower_matmul(const GraphNode& n) {
    int a = n.inputs[0], b = n.inputs[1], v = n.outputs[0];
    HalideTensor ta = func_of(a);
    bool a_is_input = false;
    for (const ImageParam& p : out_.inputs) a_is_input = a_is_input || ta.func.name() == p.name() + "_f";
    if (!a_is_input) out_.materialized.push_back(ta.func);  // computed once, not once per panel
    int R = ta.rank();
    int64_t K = g_.values[size_t(b)].meta.shape[0];
    std::vector<Var> vars = halide_vars(R);  // d0 = n, d1 = m, then batch dims
    Var j("j"), p("p");
    std::vector<Expr> a_at{Expr(), clamp(vars[1], 0, ta.shape[size_t(R - 2)] - 1)};
    std::vector<Var> acc_args{j, vars[1]};
    for (int d = 2; d < R; ++d) a_at.push_back(vars[size_t(d)]), acc_args.push_back(vars[size_t(d)]);
    acc_args.push_back(p);
    RDom r(0, int32_t(K), named("k", v));
    a_at[0] = r;
    Func acc(named("gemm", v));
    acc(acc_args) = 0.0f;
    acc(acc_args) += ta.func(a_at) * packed_.at(b)(j, r, p);
    std::vector<Expr> o_at{vars[0] % kGemmPanel, vars[1]};
    for (int d = 2; d < R; ++d) o_at.push_back(vars[size_t(d)]);
    o_at.push_back(vars[0] / kGemmPanel);
    Func o(named("matmul", v));
    o(vars) = acc(o_at);
    out_.values[v] = {o, shape_of(v), DType::f32};
    out_.gemms.push_back({acc, v, epilogue_root(v)});
  }

  void lower_node(const GraphNode& n) {
    const OpDef& op = *n.op;
    int v = n.outputs[0];
    if (op.gemm) {
      lower_matmul(n);
    } else if (op.schedule_class == ScheduleClass::data_movement && op.pointwise) {  // a copy: the values as stored
      int in = n.inputs[0];
      define_expr(v, named("contiguous", v), [this, in](const std::vector<Expr>& a) { return at(in, a); });
    } else if (is_pointwise(n)) {
      lower_pointwise(n);
    } else if (op.schedule_class == ScheduleClass::view) {
      lower_view(n);
    } else {
      lower_define(n);
    }
  }

  // The value at `args` (innermost first), each input read with broadcasting.
  void lower_pointwise(const GraphNode& n) {
    const OpDef& op = *n.op;
    int v = n.outputs[0];
    const Value& out = g_.values[v];
    std::vector<TensorMeta> metas;
    for (int i : n.inputs) metas.push_back(g_.values[i].meta);
    DType ct = op.compute_dtype ? op.compute_dtype(metas) : out.meta.dtype;
    DType kt = widened(ct);
    DType kout = out.meta.dtype == ct ? kt : out.meta.dtype;
    define_expr(v, named(op.name, v), [this, &n, v, kt, kout](const std::vector<Expr>& args) {
      const OpDef& op = *n.op;
      int R = int(args.size());
      std::vector<Expr> values;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        int iv = n.inputs[i];
        const Value& in = g_.values[size_t(iv)];
        int r = int(in.meta.shape.size());
        std::vector<Expr> where;
        for (int h = 0; h < r; ++h) {
          size_t d = size_t(r - 1 - h), od = size_t(R - 1 - h);
          where.push_back(dim_is_one(g_, iv, d) && !dim_is_one(g_, v, od) ? Expr(0) : args[h]);
        }
        Expr stored = at(iv, where);
        bool cond = int(i) == op.condition_input;
        values.push_back(cond ? load_value(stored, DType::bool_) : load_value(convert(stored, in.meta.dtype, kt), kt));
      }
      return convert(store_value(op.pointwise(values, n.attrs), kout), kout, g_.values[size_t(v)].meta.dtype);
    });
  }

  void lower_define(const GraphNode& n) {
    std::vector<HalideTensor> ins;
    for (int iv : n.inputs) {
      HalideTensor x = func_of(iv);
      DType w = (x.dtype == DType::f16 || x.dtype == DType::bf16) ? DType::f32 : x.dtype;
      if (w != x.dtype) {
        std::vector<Var> vars = halide_vars(x.rank());
        Func c(named("widen", iv));
        c(vars) = convert(x.func(vars), x.dtype, w);
        x = {c, x.shape, w};
      }
      ins.push_back(x);
    }
    std::vector<HalideTensor> outs = n.op->define(ins, n.attrs);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      int v = n.outputs[k];
      DType want = g_.values[v].meta.dtype;
      HalideTensor y = outs[k];
      KILN_CHECK(y.func.dimensions() == int(shape_of(v).size()), n.op->name, ": its definition's output ", k, " has ",
                 y.func.dimensions(), " dims, but its shape rule gives ", to_string(g_.values[size_t(v)].meta.shape));
      if (y.dtype != want) {
        std::vector<Var> vars = halide_vars(y.rank());
        Func c(named(n.op->name + "_cast", v));
        c(vars) = convert(y.func(vars), y.dtype, want);
        y.func = c;
      }
      if (y.func.has_update_definition()) {  // a pure Func over it: schedules see one kind of root
        std::vector<Var> vars = halide_vars(y.rank());
        Func w(named(n.op->name + "_out", v));
        w(vars) = y.func(vars);
        y.func = w;
      }
      out_.values[v] = {y.func, shape_of(v), want};
    }
  }

  // Views: the output's coordinates mapped to the input's, as index arithmetic.
  void lower_view(const GraphNode& n) {
    int v = n.outputs[0];
    define_expr(v, named(n.op->name, v),
                [this, &n](const std::vector<Expr>& args) { return view_at(n, args); });
  }

  Expr view_at(const GraphNode& n, const std::vector<Expr>& args) {
    int in = n.inputs[0], v = n.outputs[0];
    return at(in, view_source_index(g_, n, args, shape_of(in), shape_of(v)));
  }

  const Graph& g_;
  const Region& r_;
  LoweredRegion out_;
  std::map<int, std::function<Expr(const std::vector<Expr>&)>> expr_of_;  // values inlined as Exprs
  std::map<int, std::string> names_;
  std::map<int, ImageParam> packed_;  // packed weights, by the value they hold
  // Whether a value read more than once is recomputed by each reader rather than stored: one
  // cheap op (a comparison, a select, an add) of values that are stored anyway (the region's
  // inputs, 0-d values, materialized Funcs) or are themselves one such op (two ops deep at
  // most), and not an output. Storing it would cost a loop of its own and a load per reader
  // (GELU's derivative reads x == 0 twice: 0.2 ms a step as a stored [4, 256, 2048] mask; x
  // itself is mm + b, recomputed from the GEMM's output, see fusion.cpp).
  bool recomputed(const GraphNode& node, int depth = 0) const {
    int v = node.outputs[0];
    if (!is_cheap_pointwise(node) || is_output(v) || compared_with_its_reduction(v))
      return false;
    return std::all_of(node.inputs.begin(), node.inputs.end(), [&](int u) {
      bool made_here = std::find(r_.inputs.begin(), r_.inputs.end(), u) == r_.inputs.end();
      if (!made_here || stored_.count(u) || g_.values[size_t(u)].meta.shape.empty()) return true;
      int p = g_.values[size_t(u)].producer;
      return depth == 0 && p >= 0 && recomputed(g_.nodes[size_t(p)], depth + 1);
    });
  }

  // Whether floating value v is read here both by a comparison and by a reduction (max's
  // derivative: eq(x, max(x)) marks the maxima), or by an op that compares it with its own
  // reduction (argmax). v is then computed once, so that the comparison sees the bits the
  // reduction read: inlined into each, x * 0.5 + 0.25 == max became x * 0.5 == max - 0.25 in
  // Halide's simplifier (and an FMA may round one copy differently), no element of a row matched
  // its max, and the gradient was 0 / 0 (argmax gave the row's length).
  bool compared_with_its_reduction(int v) const {
    if (!is_floating(g_.values[size_t(v)].meta.dtype)) return false;
    bool compared = false, reduced = false;
    for (int n : r_.nodes) {
      const GraphNode& node = g_.nodes[size_t(n)];
      if (std::find(node.inputs.begin(), node.inputs.end(), v) == node.inputs.end()) continue;
      if (node.op->compares_with_own_reduction) return true;
      compared = compared || node.op->comparison;
      reduced = reduced || node.op->schedule_class == ScheduleClass::reduction ||
                node.op->schedule_class == ScheduleClass::normalization;
    }
    return compared && reduced;
  }

  // Whether a row op (softmax, a sum over the last dim kept as a dim) is left unstored, its pure
  // Func inlined into its one reader: a pointwise op of the row op's input shape in this region.
  // The reader's schedule then computes the row op's reductions row by row, just before it reads
  // the row again (from cache), instead of a pass of its own over memory; a softmax's [rows, L]
  // result is neither written nor read back (cross_entropy's backward on [8192, 50304] logits).
  // Returns the region output that the reader's chain ends at (below), or -1 when not fused.
  int fused_chain_end(const GraphNode& node) const {
    int v = node.outputs[0];
    ScheduleClass c = node.op->schedule_class;
    if ((c != ScheduleClass::reduction && c != ScheduleClass::normalization) || node.outputs.size() != 1 ||
        node.inputs.empty() || readers_of(v) != 1 || is_output(v) || out_.values.at(v).func.has_update_definition() ||
        reduction_kind(g_, v) != Reduces::rows)
      return -1;
    const Shape& row_shape = g_.values[size_t(node.inputs[0])].meta.shape;
    const GraphNode& reader = g_.nodes[size_t(reader_.at(v))];
    if (row_shape.empty() || !is_elementwise(reader) ||
        g_.values[size_t(reader.outputs[0])].meta.shape != row_shape ||
        g_.values[size_t(v)].meta.shape.size() != row_shape.size())
      return -1;
    // From the reader on, a chain of values each read once, by a pointwise op, a copy or a view, must end
    // at a region output: then that output's Func alone reaches the row op's reductions.
    // Pointwise values are inlined into every reader, stored or not, so a value read twice would
    // put them into two stored Funcs (fuzz seed 3000001: a mean's x - mean, read again by the
    // variance's sum). An output read again in the region is stored before its readers are
    // lowered (stored_first_), so they load it: a layer norm's backward, whose input gradient a
    // bias gradient sums again, computes its two row sums in the gradient's kernel.
    return reader_chain_end(reader.outputs[0], false, [](int) { return true; });
  }

  // Where a reduction's result is stored instead of its own Func: the end of its one reader
  // chain at a region output or a value read twice here, which is stored (stored_first_); -1
  // when none. Every value of the chain is read once, by a pointwise op or a view, and holds the
  // reduced values in their order (its dims, those always 1 aside, are the reduction's: a
  // reshape, not a transpose); none is 0-d (stored for itself). The reduced values pass through
  // the chain in registers (var + eps then rsqrt, a sum then a reshape) and the stored Func's
  // schedule computes the reduction (gpu_schedule.cpp). One reduction per stored Func, and none
  // in a region with a GEMM (its epilogue holds no reduction: cpu_schedule.cpp).
  int epilogue_end(const GraphNode& node) const {
    ScheduleClass c = node.op->schedule_class;
    int v = node.outputs[0];
    if ((c != ScheduleClass::reduction && c != ScheduleClass::normalization) || node.outputs.size() != 1 ||
        out_.values.at(v).func.has_update_definition() || g_.values[size_t(v)].meta.shape.empty() || has_gemm_)
      return -1;
    auto dims = [this](int u) {  // the dims not always 1
      std::vector<SymDim> d;
      for (const SymDim& x : g_.values[size_t(u)].sym)
        if (SymDim c = g_.shape_env->canonical(x); !(c == SymDim::constant(1))) d.push_back(c);
      return d;
    };
    const std::vector<SymDim> reduced = dims(v);
    if (is_output(v) || readers_of(v) != 1) return -1;
    int end = reader_chain_end(v, true, [&](int u) { return !g_.values[size_t(u)].meta.shape.empty() && dims(u) == reduced; });
    return end >= 0 && !out_.reduction_epilogues.count(end) ? end : -1;
  }

  bool is_output(int v) const { return std::find(r_.outputs.begin(), r_.outputs.end(), v) != r_.outputs.end(); }
  int readers_of(int v) const { return uses_.count(v) ? uses_.at(v) : 0; }

  // Follows value u's readers while each value is read once, by a pointwise op (a copy too:
  // softmax's backward goes on transposed) or a view of one output whose value passes `keeps`.
  // Returns where the chain ends: the first region output, or with `read_twice_ends` the first
  // value read more than once; -1 when it breaks first.
  int reader_chain_end(int u, bool read_twice_ends, const std::function<bool(int)>& keeps) const {
    for (;;) {
      if (is_output(u) || (read_twice_ends && readers_of(u) > 1)) return u;
      if (readers_of(u) != 1) return -1;
      const GraphNode& next = g_.nodes[size_t(reader_.at(u))];
      if ((!is_pointwise(next) && next.op->schedule_class != ScheduleClass::view) || next.outputs.size() != 1) return -1;
      u = next.outputs[0];
      if (!keeps(u)) return -1;
    }
  }

  std::map<int, int> uses_;           // readers of each value inside the region
  std::set<int> stored_;              // values made here whose Funcs are materialized
  std::set<int> stored_first_;        // values stored before their readers are lowered (chain ends)
  bool has_gemm_ = false;             // a matmul of the region is lowered as a GEMM
  std::map<int, int> reader_;         // a reader of each value (the only one when uses_ is 1)
};

}  // namespace

Shape region_input_shape(const Graph& g, const Region& r, size_t k) {
  int v = r.inputs[k];
  const Shape& s = g.values[size_t(v)].meta.shape;
  return std::find(r.packed.begin(), r.packed.end(), v) != r.packed.end() ? panel_shape(s) : s;
}

std::vector<int> region_symbols(const Graph& g, const Region& r) {
  std::set<int> out;
  auto add = [&](int v) {
    for (const SymDim& d : g.values[size_t(v)].sym)
      for (int s : g.shape_env->canonical(d).syms) out.insert(s);
  };
  for (int v : r.inputs) add(v);
  for (int n : r.nodes)
    for (int v : g.nodes[size_t(n)].outputs) add(v);
  return {out.begin(), out.end()};
}

LoweredRegion lower_region(const Graph& g, const Region& r) { return Lowering(g, r).run(); }

void set_dense_strides(OutputImageParam buffer, const std::vector<Expr>& shape) {
  Expr stride = 1;
  for (int d = 0; d < buffer.dimensions(); ++d) {
    buffer.dim(d).set_stride(stride);
    stride = simplify(stride * shape[shape.size() - 1 - size_t(d)]);
  }
}

void set_dense_shape(OutputImageParam buffer, const std::vector<Expr>& shape) {
  for (int d = 0; d < buffer.dimensions(); ++d) buffer.dim(d).set_bounds(0, shape[shape.size() - 1 - size_t(d)]);
  set_dense_strides(buffer, shape);
}

std::vector<Argument> pipeline_arguments(const Region& r, const LoweredRegion& lowered) {
  std::vector<Argument> args(lowered.inputs.begin(), lowered.inputs.end());
  for (int s : r.symbols) args.push_back(lowered.symbols.at(s));
  return args;
}

}  // namespace kiln
