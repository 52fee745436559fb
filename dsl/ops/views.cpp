// Data movement: views change metadata only (reshape/view, permute, transpose, expand, squeeze,
// unsqueeze, slice); contiguous copies into a dense layout (cat and stack copy into slices).
#include <array>

#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

namespace {

using Halide::Expr;

// Strides for viewing (shape, strides) as `to` without copying, or an empty result when the
// layout does not allow it (the rule of PyTorch's view: each run of merged dims must be
// contiguous within itself).
bool view_strides(const Shape& from, const Strides& st, const Shape& to, Strides& out) {
  out.assign(to.size(), 0);
  if (numel(from) == 0) {
    out = contiguous_strides(to);
    return true;
  }
  size_t fi = 0, ti = 0;
  while (ti < to.size() || fi < from.size()) {
    // Take one chunk of `from` dims whose product equals a chunk of `to` dims.
    int64_t fprod = 1, tprod = 1;
    size_t f0 = fi, t0 = ti;
    if (fi < from.size()) fprod = from[fi++];
    if (ti < to.size()) tprod = to[ti++];
    while (fprod != tprod) {
      if (fprod < tprod) {
        if (fi >= from.size()) return false;
        fprod *= from[fi++];
      } else {
        if (ti >= to.size()) return false;
        tprod *= to[ti++];
      }
    }
    // from dims [f0, fi) must be mutually contiguous.
    int64_t prev = -1;  // the last non-1 dim seen
    for (size_t k = f0; k < fi; ++k) {
      if (from[k] == 1) continue;
      if (prev >= 0 && st[prev] != st[k] * from[k]) return false;
      prev = int64_t(k);
    }
    int64_t inner = 1;
    for (size_t k = fi; k-- > f0;)
      if (from[k] != 1) { inner = st[k]; break; }
    for (size_t k = ti; k-- > t0;) {
      out[k] = inner;
      inner *= to[k];
    }
  }
  return true;
}

Shape infer_reshape(std::string_view op, const Shape& in, std::vector<int64_t> to) {
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      KILN_CHECK(infer < 0, op, ": only one dim can be -1 in ", to_string(to));
      infer = int(i);
    } else {
      KILN_CHECK(to[i] >= 0, op, ": invalid size ", to[i], " in ", to_string(to));
      known *= to[i];
    }
  }
  int64_t n = numel(in);
  if (infer >= 0) {
    KILN_CHECK(known != 0 && n % known == 0, op, ": cannot reshape ", to_string(in), " (", n,
               " elements) into ", to_string(to));
    to[infer] = n / known;
  }
  KILN_CHECK(numel(to) == n, op, ": cannot reshape ", to_string(in), " (", n, " elements) into ",
             to_string(to), " (", numel(to), " elements); the element count must stay the same");
  return to;
}

OpDef view_op(std::string name, ViewRule layout, ViewIndexRule index, bool reshape = false) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::view;
  d.family = KernelFamily::view;
  d.num_inputs = 1;
  d.view = {layout, std::move(index), reshape};
  d.infer = [layout](const std::vector<TensorMeta>& in, const Attrs& a) {
    ViewMeta v = layout({in[0].shape, contiguous_strides(in[0].shape), 0}, a);
    return std::vector<TensorMeta>{{v.shape, in[0].dtype, in[0].device}};
  };
  return d;
}

// The index rules. `o` is the output index, outermost first; each returns the input index.

std::vector<Expr> same_index(const std::vector<Expr>& o, const ViewIndexShapes&, const Attrs&) { return o; }

std::vector<Expr> permuted_index(const std::vector<Expr>& o, const std::vector<int>& perm) {
  std::vector<Expr> i(o.size());
  for (size_t d = 0; d < o.size(); ++d) i[size_t(perm[d])] = o[d];
  return i;
}

// A reshape's dims matched in runs of equal element count, {input begin, end, output begin,
// end} (flatten(0, 1) of [4, 256, 2048]: [4, 256] <-> [1024] and [2048] <-> [2048]), so each
// index is unravelled within its run only: a dim that passes through is read as it is, and the
// innermost index stays the innermost var (dense vector loads). The traced sizes pick the runs
// and the symbolic sizes must agree; false when they do not split so (one run then).
bool reshape_runs(const ViewIndexShapes& s, std::vector<std::array<int, 4>>& runs) {
  int r = int(s.in.size()), R = int(s.out.size()), a = 0, b = 0;
  if (numel(s.in) == 0) return false;
  while (a < r && b < R) {
    int a0 = a, b0 = b;
    int64_t pi = s.in[size_t(a++)], po = s.out[size_t(b++)];
    while (pi != po) {
      if (pi < po && a < r) pi *= s.in[size_t(a++)];
      else if (po < pi && b < R) po *= s.out[size_t(b++)];
      else return false;
    }
    if (!s.same_count(a0, a, b0, b)) return false;
    runs.push_back({a0, a, b0, b});
  }
  for (; a < r; ++a)
    if (s.in[size_t(a)] != 1) return false;
  for (; b < R; ++b)
    if (s.out[size_t(b)] != 1) return false;
  return true;
}

// view, flatten, unflatten: the same elements in row-major order.
std::vector<Expr> reshape_index(const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs&) {
  int r = int(s.in.size()), R = int(s.out.size());
  std::vector<Expr> i(size_t(r), Expr(0));  // size-1 dims outside every run read index 0
  std::vector<std::array<int, 4>> runs;
  if (!reshape_runs(s, runs)) runs = {{0, r, 0, R}};
  for (const auto& [a0, a1, b0, b1] : runs) {
    // Dims of size 1 at every call take no part: a run of one such dim each side (a [1, 1, 768]
    // sum kept as [768]) maps the index as it is, no division or modulo, so that bounds
    // inference of one output point gives one input point.
    std::vector<int> ins, outs;
    for (int d = a0; d < a1; ++d)
      if (!s.in_dim_is_one(d)) ins.push_back(d);
    for (int d = b0; d < b1; ++d)
      if (!s.out_dim_is_one(d)) outs.push_back(d);
    if (ins.size() <= 1 && outs.size() <= 1) {
      if (!ins.empty()) i[size_t(ins[0])] = outs.empty() ? Expr(0) : o[size_t(outs[0])];
      continue;
    }
    Expr linear = o[size_t(b0)];
    for (int d = b0 + 1; d < b1; ++d) linear = linear * s.out_extent[size_t(d)] + o[size_t(d)];
    for (int d = a1 - 1; d >= a0; --d) {
      i[size_t(d)] = d == a0 ? linear : linear % s.in_extent[size_t(d)];
      if (d > a0) linear = linear / s.in_extent[size_t(d)];
    }
  }
  return i;
}

ViewMeta permuted(const ViewMeta& in, const std::vector<int>& perm) {
  ViewMeta v{{}, {}, in.offset};
  for (int p : perm) {
    v.shape.push_back(in.shape[p]);
    v.strides.push_back(in.strides[p]);
  }
  return v;
}

// Output dim d of permute and transpose is input dim order[d].
std::vector<int> permute_order(int64_t rank, const Attrs& a) {
  const auto& dims = a.get<std::vector<int64_t>>("dims");
  KILN_CHECK(int64_t(dims.size()) == rank, "permute: ", dims.size(), " dims given for a tensor of rank ", rank);
  std::vector<int> order;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t d : dims) {
    int w = wrap_dim("permute", d, rank);
    KILN_CHECK(!seen[size_t(w)], "permute: dim ", d, " appears twice in ", to_string(dims));
    seen[size_t(w)] = true;
    order.push_back(w);
  }
  return order;
}

std::vector<int> transpose_order(int64_t rank, const Attrs& a) {
  std::vector<int> order;
  for (int i = 0; i < rank; ++i) order.push_back(i);
  if (rank > 0)
    std::swap(order[size_t(wrap_dim("transpose", a.get<int64_t>("dim0"), rank))],
              order[size_t(wrap_dim("transpose", a.get<int64_t>("dim1"), rank))]);
  return order;
}

// Which input dims squeeze drops: size 1, and the given dim if there is one.
std::vector<bool> squeezed(const Shape& in, const Attrs& a) {
  int64_t rank = int64_t(in.size());
  int only = a.has("dim") ? wrap_dim("squeeze", a.get<int64_t>("dim"), rank) : -1;
  std::vector<bool> drop(in.size());
  for (int i = 0; i < rank; ++i) drop[size_t(i)] = in[size_t(i)] == 1 && (only < 0 || only == i);
  return drop;
}

// The position of unsqueeze's new dim in an output of rank `rank + 1`.
int unsqueezed(int64_t rank, const Attrs& a) {
  int64_t dim = a.get<int64_t>("dim");
  KILN_CHECK(dim >= -(rank + 1) && dim <= rank, "unsqueeze: dim ", dim, " out of range for a tensor of rank ", rank,
             " (expected ", -(rank + 1), " <= dim <= ", rank, ")");
  return int(dim < 0 ? dim + rank + 1 : dim);
}

}  // namespace

void KILN_OP_TABLES::add_view_ops(std::vector<OpDef>& defs) {
  defs.push_back(view_op(
      "view",
      [](const ViewMeta& in, const Attrs& a) {
        Shape to = infer_reshape("view", in.shape, a.get<std::vector<int64_t>>("shape"));
        ViewMeta v{to, {}, in.offset};
        KILN_CHECK(view_strides(in.shape, in.strides, to, v.strides), "view: a tensor of shape ",
                   to_string(in.shape), " with strides ", to_string(in.strides), " cannot be viewed as ",
                   to_string(to), " without a copy; use reshape()");
        return v;
      },
      KILN_HALIDE(reshape_index), true));
  // detach: the same view, cut from autograd (no derivative rule). Tensor::detach() makes it
  // directly; graph capture records it as this op so replays cut the tape too.
  OpDef detach = view_op("detach", [](const ViewMeta& in, const Attrs&) { return in; }, KILN_HALIDE(same_index));
  detach.differentiable = false;
  defs.push_back(std::move(detach));
  defs.push_back(view_op(
      "flatten",
      [](const ViewMeta& in, const Attrs& a) {
        int64_t rank = int64_t(in.shape.size());
        if (rank == 0) return ViewMeta{{1}, {1}, in.offset};
        int s = wrap_dim("flatten", a.get<int64_t>("start_dim"), rank), e = wrap_dim("flatten", a.get<int64_t>("end_dim"), rank);
        KILN_CHECK(s <= e, "flatten: start_dim ", a.get<int64_t>("start_dim"), " comes after end_dim ",
                   a.get<int64_t>("end_dim"), " for a tensor of shape ", to_string(in.shape));
        Shape to(in.shape.begin(), in.shape.begin() + s);
        to.push_back(numel(Shape(in.shape.begin() + s, in.shape.begin() + e + 1)));
        to.insert(to.end(), in.shape.begin() + e + 1, in.shape.end());
        ViewMeta v{to, {}, in.offset};
        KILN_CHECK(view_strides(in.shape, in.strides, to, v.strides), "flatten: dims ", s, "..", e,
                   " of a tensor of shape ", to_string(in.shape), " with strides ", to_string(in.strides),
                   " cannot be merged without a copy; use reshape()");
        return v;
      },
      KILN_HALIDE(reshape_index), true));
  defs.push_back(view_op(
      "unflatten",
      [](const ViewMeta& in, const Attrs& a) {
        int64_t rank = int64_t(in.shape.size());
        int d = wrap_dim("unflatten", a.get<int64_t>("dim"), rank);
        Shape sizes = infer_reshape("unflatten", {in.shape[d]}, a.get<std::vector<int64_t>>("sizes"));
        ViewMeta v{Shape(in.shape.begin(), in.shape.begin() + d), Strides(in.strides.begin(), in.strides.begin() + d),
                   in.offset};
        int64_t inner = in.strides[d];
        Strides split(sizes.size());
        for (size_t k = sizes.size(); k-- > 0;) {
          split[k] = inner;
          inner *= sizes[k];
        }
        v.shape.insert(v.shape.end(), sizes.begin(), sizes.end());
        v.strides.insert(v.strides.end(), split.begin(), split.end());
        v.shape.insert(v.shape.end(), in.shape.begin() + d + 1, in.shape.end());
        v.strides.insert(v.strides.end(), in.strides.begin() + d + 1, in.strides.end());
        return v;
      },
      KILN_HALIDE(reshape_index), true));
  defs.push_back(view_op(
      "permute",
      [](const ViewMeta& in, const Attrs& a) { return permuted(in, permute_order(int64_t(in.shape.size()), a)); },
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs& a) {
        return permuted_index(o, permute_order(int64_t(s.in.size()), a));
      })));
  defs.push_back(view_op(
      "transpose",
      [](const ViewMeta& in, const Attrs& a) { return permuted(in, transpose_order(int64_t(in.shape.size()), a)); },
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs& a) {
        return permuted_index(o, transpose_order(int64_t(s.in.size()), a));
      })));
  defs.push_back(view_op(
      "expand",
      [](const ViewMeta& in, const Attrs& a) {
        Shape to = a.get<std::vector<int64_t>>("shape");
        KILN_CHECK(to.size() >= in.shape.size(), "expand: cannot expand ", to_string(in.shape), " to ",
                   to_string(to), " (fewer dims)");
        size_t off = to.size() - in.shape.size();
        ViewMeta v{to, Strides(to.size(), 0), in.offset};
        for (size_t i = 0; i < to.size(); ++i) {
          if (i < off) {
            KILN_CHECK(to[i] >= 0, "expand: size -1 not allowed for a new leading dim in ", to_string(to));
            continue;
          }
          int64_t s = in.shape[i - off];
          if (to[i] == -1) to[i] = v.shape[i] = s;
          KILN_CHECK(s == to[i] || s == 1, "expand: cannot expand ", to_string(in.shape), " to ",
                     to_string(to), " (dim ", i, ": ", s, " -> ", to[i], "; only size-1 dims expand)");
          v.strides[i] = (s == to[i]) ? in.strides[i - off] : 0;
        }
        return v;
      },
      // A dim broadcast from size 1 reads index 0; new leading dims are not read.
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs&) {
        size_t r = s.in.size(), off = s.out.size() - r;
        std::vector<Expr> i(r);
        for (size_t d = 0; d < r; ++d)
          i[d] = s.in_dim_is_one(int(d)) && !s.out_dim_is_one(int(d + off)) ? Expr(0) : o[d + off];
        return i;
      })));
  defs.push_back(view_op(
      "squeeze",
      [](const ViewMeta& in, const Attrs& a) {
        std::vector<bool> drop = squeezed(in.shape, a);
        ViewMeta v{{}, {}, in.offset};
        for (size_t i = 0; i < in.shape.size(); ++i) {
          if (drop[i]) continue;
          v.shape.push_back(in.shape[i]);
          v.strides.push_back(in.strides[i]);
        }
        return v;
      },
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs& a) {
        std::vector<bool> drop = squeezed(s.in, a);
        std::vector<Expr> i(s.in.size());
        for (size_t d = 0, k = 0; d < s.in.size(); ++d) i[d] = drop[d] ? Expr(0) : o[k++];
        return i;
      }),
      true));
  defs.push_back(view_op(
      "unsqueeze",
      [](const ViewMeta& in, const Attrs& a) {
        int64_t rank = int64_t(in.shape.size());
        int d = unsqueezed(rank, a);
        ViewMeta v = in;
        int64_t st = d < rank ? in.strides[d] * in.shape[d] : 1;
        v.shape.insert(v.shape.begin() + d, 1);
        v.strides.insert(v.strides.begin() + d, st);
        return v;
      },
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs& a) {
        size_t u = size_t(unsqueezed(int64_t(s.in.size()), a));
        std::vector<Expr> i;
        for (size_t d = 0; d < o.size(); ++d)
          if (d != u) i.push_back(o[d]);
        return i;
      }),
      true));
  defs.push_back(view_op(
      "slice",
      [](const ViewMeta& in, const Attrs& a) {
        int64_t rank = int64_t(in.shape.size());
        KILN_CHECK(rank > 0, "slice: cannot slice a 0-d tensor");
        int d = wrap_dim("slice", a.get<int64_t>("dim"), rank);
        int64_t n = in.shape[d], start = a.get<int64_t>("start"), end = a.get<int64_t>("end"),
                step = a.get<int64_t>("step");
        KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
        if (start < 0) start += n;
        if (end < 0) end += n;
        start = std::clamp<int64_t>(start, 0, n);
        end = std::clamp<int64_t>(end, start, n);
        ViewMeta v = in;
        v.shape[d] = (end - start + step - 1) / step;
        v.strides[d] = in.strides[d] * step;
        v.offset = in.offset + start * in.strides[d];
        return v;
      },
      // The same start rule as the layout's, on the pipeline's (possibly symbolic) extent.
      KILN_HALIDE([](const std::vector<Expr>& o, const ViewIndexShapes& s, const Attrs& a) {
        size_t d = size_t(wrap_dim("slice", a.get<int64_t>("dim"), int64_t(s.in.size())));
        Expr n = s.in_extent[d], start = Expr(int32_t(a.get<int64_t>("start")));
        start = Halide::clamp(Halide::select(start < 0, start + n, start), 0, n);
        std::vector<Expr> i = o;
        i[d] = start + o[d] * int32_t(a.get<int64_t>("step"));
        return i;
      })));

  OpDef c;
  c.name = "contiguous";
  c.schedule_class = ScheduleClass::data_movement;
  c.family = KernelFamily::copy;
  c.num_inputs = 1;
  c.infer = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; };
  c.pointwise = KILN_HALIDE([](const std::vector<Halide::Expr>& in, const Attrs&) { return in[0]; });
  defs.push_back(std::move(c));
}

}  // namespace kiln
