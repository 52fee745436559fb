// Creation ops: tensors made from attributes alone (filled, ranges, random draws), plus
// rand_like, which takes only its input's shape. Being ops, they reach dispatch(): graph capture
// records them as nodes, so a compiled function builds its constants and draws fresh random
// numbers on every call instead of baking in what it saw while tracing.
#include <cmath>

#include "dsl/ops/op_tables.h"

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

}  // namespace

void add_creation_ops(std::vector<OpDef>& defs) {
  defs.push_back(creation_op("full", 0, false, shape_attr));
  defs.push_back(creation_op("arange", 0, false, [](const std::vector<TensorMeta>&, const Attrs& a) {
    double start = a.get<double>("start"), end = a.get<double>("end"), step = a.get<double>("step");
    KILN_CHECK(step != 0, "arange: step must be nonzero");
    KILN_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") with step ", step,
               " has the wrong sign");
    return Shape{int64_t(std::ceil((end - start) / step))};
  }));
  defs.push_back(creation_op("linspace", 0, false, [](const std::vector<TensorMeta>&, const Attrs& a) {
    int64_t steps = a.get<int64_t>("steps");
    KILN_CHECK(steps >= 0, "linspace: steps must be >= 0, got ", steps);
    return Shape{steps};
  }));
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
