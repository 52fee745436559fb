// Creation ops: tensors made from attributes alone (filled, ranges, random draws), plus
// rand_like, which takes only its input's shape. Being ops, they reach dispatch(): graph capture
// records them as nodes, so a compiled function builds its constants and draws fresh random
// numbers on every call instead of baking in what it saw while tracing.
#include <cmath>

#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/ranges.h"

namespace kiln {

namespace {

DType dtype_attr(const Attrs& a) { return dtype_from_name(a.get<std::string>("dtype")); }
Device device_attr(const Attrs& a) { return device_from_name(a.get_or<std::string>("device", "cpu")); }

void check_shape(std::string_view op, const Shape& s) {
  for (int64_t d : s) KILN_CHECK(d >= 0, op, ": negative size in shape ", to_string(s));
}

OpDef creation_op(std::string name, int num_inputs, bool random,
                  std::function<Shape(const std::vector<TensorMeta>&, const Attrs&)> shape_of) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::creation;
  d.family = KernelFamily::creation;
  d.num_inputs = num_inputs;
  d.random = random;
  d.infer = [name, shape_of](const std::vector<TensorMeta>& in, const Attrs& a) {
    Shape s = shape_of(in, a);
    check_shape(name, s);
    DType t = dtype_attr(a);
    if (name == "rand" || name == "randn" || name == "rand_like")
      KILN_CHECK(is_floating(t), name, ": dtype must be floating, got ", t);
    return std::vector<TensorMeta>{{s, t, in.empty() ? device_attr(a) : in[0].device}};
  };
  return d;
}

Shape shape_attr(const std::vector<TensorMeta>&, const Attrs& a) { return a.get<std::vector<int64_t>>("shape"); }

// The Halide definition of a creation op whose element depends on its index and attributes
// alone: value(i, attrs, count) for a 1-d result, or the same value everywhere (full).
void define_by_index(OpDef& d, std::function<Halide::Expr(const Halide::Expr& i, const Attrs&, int64_t count)> value) {
  d.define = KILN_HALIDE([shape_of = d.infer, value, name = d.name](const std::vector<HalideTensor>&, const Attrs& a) {
    TensorMeta m = shape_of({}, a)[0];
    std::vector<Halide::Var> v = halide_vars(int(m.shape.size()));
    Halide::Func out(name);
    Halide::Expr i = v.empty() ? Halide::Expr(0) : Halide::Expr(v[0]);
    out(v) = store_value(value(i, a, numel(m.shape)), m.dtype);
    std::vector<Halide::Expr> shape;
    for (int64_t n : m.shape) shape.push_back(Halide::Expr(int32_t(n)));
    return std::vector<HalideTensor>{{out, shape, m.dtype}};
  });
}

Halide::Expr range_value(const Halide::Expr& i, std::string_view op, const Attrs& a, int64_t count) {
  return range_element(range_params(op, a, count), i, count);
}

}  // namespace

void KILN_OP_TABLES::add_creation_ops(std::vector<OpDef>& defs) {
  OpDef full = creation_op("full", 0, false, shape_attr);
  define_by_index(full, KILN_HALIDE([](const Halide::Expr&, const Attrs& a, int64_t) { return Halide::Expr(a.get<double>("value")); }));
  defs.push_back(std::move(full));
  OpDef arange = creation_op("arange", 0, false, [](const std::vector<TensorMeta>&, const Attrs& a) {
    double start = a.get<double>("start"), end = a.get<double>("end"), step = a.get<double>("step");
    KILN_CHECK(step != 0, "arange: step must be nonzero");
    KILN_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") with step ", step,
               " has the wrong sign");
    return Shape{int64_t(std::ceil((end - start) / step))};
  });
  define_by_index(arange, KILN_HALIDE([](const Halide::Expr& i, const Attrs& a, int64_t count) { return range_value(i, "arange", a, count); }));
  defs.push_back(std::move(arange));
  OpDef linspace = creation_op("linspace", 0, false, [](const std::vector<TensorMeta>&, const Attrs& a) {
    int64_t steps = a.get<int64_t>("steps");
    KILN_CHECK(steps >= 0, "linspace: steps must be >= 0, got ", steps);
    return Shape{steps};
  });
  define_by_index(linspace, KILN_HALIDE([](const Halide::Expr& i, const Attrs& a, int64_t count) { return range_value(i, "linspace", a, count); }));
  defs.push_back(std::move(linspace));
  defs.push_back(creation_op("rand", 0, true, shape_attr));
  defs.push_back(creation_op("randn", 0, true, shape_attr));
  defs.push_back(creation_op("randint", 0, true, [](const std::vector<TensorMeta>&, const Attrs& a) {
    KILN_CHECK(a.get<int64_t>("high") > a.get<int64_t>("low"), "randint: empty range [", a.get<int64_t>("low"),
               ", ", a.get<int64_t>("high"), ")");
    return a.get<std::vector<int64_t>>("shape");
  }));
  defs.push_back(creation_op("rand_like", 1, true,
                             [](const std::vector<TensorMeta>& in, const Attrs&) { return in[0].shape; }));
}

}  // namespace kiln
