// Data movement: views change metadata only (reshape/view, permute, transpose, expand, squeeze,
// unsqueeze, slice); contiguous copies into a dense layout (cat and stack copy into slices).
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

namespace {

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

OpDef view_op(std::string name, std::function<ViewMeta(const ViewMeta&, const Attrs&)> rule) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::view;
  d.family = KernelFamily::view;
  d.num_inputs = 1;
  d.view = rule;
  d.infer = [rule](const std::vector<TensorMeta>& in, const Attrs& a) {
    ViewMeta v = rule({in[0].shape, contiguous_strides(in[0].shape), 0}, a);
    return std::vector<TensorMeta>{{v.shape, in[0].dtype, in[0].device}};
  };
  return d;
}

ViewMeta permuted(const ViewMeta& in, const std::vector<int>& perm) {
  ViewMeta v{{}, {}, in.offset};
  for (int p : perm) {
    v.shape.push_back(in.shape[p]);
    v.strides.push_back(in.strides[p]);
  }
  return v;
}

}  // namespace

void add_view_ops(std::vector<OpDef>& defs) {
  defs.push_back(view_op("view", [](const ViewMeta& in, const Attrs& a) {
    Shape to = infer_reshape("view", in.shape, a.get<std::vector<int64_t>>("shape"));
    ViewMeta v{to, {}, in.offset};
    KILN_CHECK(view_strides(in.shape, in.strides, to, v.strides), "view: a tensor of shape ",
               to_string(in.shape), " with strides ", to_string(in.strides), " cannot be viewed as ",
               to_string(to), " without a copy; use reshape()");
    return v;
  }));
  // detach: the same view, cut from autograd (no derivative rule). Tensor::detach() makes it
  // directly; graph capture records it as this op so replays cut the tape too.
  OpDef detach = view_op("detach", [](const ViewMeta& in, const Attrs&) { return in; });
  detach.differentiable = false;
  defs.push_back(std::move(detach));
  defs.push_back(view_op("flatten", [](const ViewMeta& in, const Attrs& a) {
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
  }));
  defs.push_back(view_op("unflatten", [](const ViewMeta& in, const Attrs& a) {
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
  }));
  defs.push_back(view_op("permute", [](const ViewMeta& in, const Attrs& a) {
    const auto& dims = a.get<std::vector<int64_t>>("dims");
    int64_t rank = int64_t(in.shape.size());
    KILN_CHECK(int64_t(dims.size()) == rank, "permute: ", dims.size(), " dims given for a tensor of rank ", rank);
    std::vector<int> perm;
    std::vector<bool> seen(rank, false);
    for (int64_t d : dims) {
      int w = wrap_dim("permute", d, rank);
      KILN_CHECK(!seen[w], "permute: dim ", d, " appears twice in ", to_string(dims));
      seen[w] = true;
      perm.push_back(w);
    }
    return permuted(in, perm);
  }));
  defs.push_back(view_op("transpose", [](const ViewMeta& in, const Attrs& a) {
    int64_t rank = int64_t(in.shape.size());
    std::vector<int> perm;
    for (int i = 0; i < rank; ++i) perm.push_back(i);
    if (rank == 0) return in;
    std::swap(perm[wrap_dim("transpose", a.get<int64_t>("dim0"), rank)],
              perm[wrap_dim("transpose", a.get<int64_t>("dim1"), rank)]);
    return permuted(in, perm);
  }));
  defs.push_back(view_op("expand", [](const ViewMeta& in, const Attrs& a) {
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
  }));
  defs.push_back(view_op("squeeze", [](const ViewMeta& in, const Attrs& a) {
    int64_t rank = int64_t(in.shape.size());
    ViewMeta v{{}, {}, in.offset};
    int only = a.has("dim") ? wrap_dim("squeeze", a.get<int64_t>("dim"), rank) : -1;
    for (int i = 0; i < rank; ++i) {
      bool drop = in.shape[i] == 1 && (only < 0 || only == i);
      if (drop) continue;
      v.shape.push_back(in.shape[i]);
      v.strides.push_back(in.strides[i]);
    }
    return v;
  }));
  defs.push_back(view_op("unsqueeze", [](const ViewMeta& in, const Attrs& a) {
    int64_t rank = int64_t(in.shape.size());
    int64_t dim = a.get<int64_t>("dim");
    KILN_CHECK(dim >= -(rank + 1) && dim <= rank, "unsqueeze: dim ", dim, " out of range for a tensor of rank ",
               rank, " (expected ", -(rank + 1), " <= dim <= ", rank, ")");
    int d = int(dim < 0 ? dim + rank + 1 : dim);
    ViewMeta v = in;
    int64_t st = d < rank ? in.strides[d] * in.shape[d] : 1;
    v.shape.insert(v.shape.begin() + d, 1);
    v.strides.insert(v.strides.begin() + d, st);
    return v;
  }));
  defs.push_back(view_op("slice", [](const ViewMeta& in, const Attrs& a) {
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
  }));

  OpDef c;
  c.name = "contiguous";
  c.schedule_class = ScheduleClass::data_movement;
  c.family = KernelFamily::copy;
  c.num_inputs = 1;
  c.infer = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; };
  c.pointwise = [](const std::vector<Halide::Expr>& in, const Attrs&) { return in[0]; };
  defs.push_back(std::move(c));
}

}  // namespace kiln
