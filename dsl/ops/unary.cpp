// Unary pointwise ops: one table entry each (name, Halide expression, dtype rule).
#include "dsl/halide_def.h"
#include "dsl/ops/math_functions.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

using Halide::Expr;

namespace {

Expr one(const Expr& x) { return Halide::Internal::make_one(x.type()); }
Expr sigmoid_expr(Expr x) { return one(x) / (one(x) + Halide::exp(-x)); }

Expr gelu_expr(Expr x, const std::string& approximate) {
  Expr half = Halide::cast(x.type(), Expr(0.5));
  if (approximate == "tanh") {
    Expr k = Halide::cast(x.type(), Expr(0.7978845608028654));  // sqrt(2/pi)
    Expr c = Halide::cast(x.type(), Expr(0.044715));
    return half * x * (one(x) + tanh_expr(k * (x + c * x * x * x)));
  }
  return half * x * (one(x) + erf_expr(x * Halide::cast(x.type(), Expr(0.7071067811865476))));
}

void unary(std::vector<OpDef>& defs, std::string name, bool float_only,
           std::function<Expr(Expr, const Attrs&)> f) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::pointwise;
  d.family = KernelFamily::unary;
  d.num_inputs = 1;
  d.infer = [name, float_only](const std::vector<TensorMeta>& in, const Attrs& a) {
    DType t = in[0].dtype;
    if (float_only) t = to_floating(t);
    KILN_CHECK(t != DType::bool_, name, ": not defined for dtype bool");
    if (name == "gelu") {
      const auto& ap = a.get_or<std::string>("approximate", "none");
      KILN_CHECK(ap == "none" || ap == "tanh", "gelu: approximate must be 'none' or 'tanh', got '", ap, "'");
    }
    return std::vector<TensorMeta>{{in[0].shape, t, in[0].device}};
  };
  d.pointwise = [f](const std::vector<Expr>& in, const Attrs& a) { return f(in[0], a); };
  defs.push_back(std::move(d));
}

}  // namespace

void add_unary_ops(std::vector<OpDef>& defs) {
  using A = const Attrs&;
  unary(defs, "neg", false, [](Expr x, A) { return -x; });
  unary(defs, "abs", false, [](Expr x, A) { return Halide::cast(x.type(), Halide::abs(x)); });
  unary(defs, "square", false, [](Expr x, A) { return x * x; });
  unary(defs, "relu", false, [](Expr x, A) { return Halide::max(x, Halide::Internal::make_zero(x.type())); });
  unary(defs, "exp", true, [](Expr x, A) { return Halide::exp(x); });
  unary(defs, "log", true, [](Expr x, A) { return Halide::log(x); });
  unary(defs, "sqrt", true, [](Expr x, A) { return Halide::sqrt(x); });
  unary(defs, "rsqrt", true, [](Expr x, A) { return one(x) / Halide::sqrt(x); });
  unary(defs, "sin", true, [](Expr x, A) { return sin_expr(x); });
  unary(defs, "cos", true, [](Expr x, A) { return cos_expr(x); });
  unary(defs, "tanh", true, [](Expr x, A) { return tanh_expr(x); });
  unary(defs, "sigmoid", true, [](Expr x, A) { return sigmoid_expr(x); });
  unary(defs, "silu", true, [](Expr x, A) { return x * sigmoid_expr(x); });
  unary(defs, "reciprocal", true, [](Expr x, A) { return one(x) / x; });
  unary(defs, "gelu", true, [](Expr x, A a) {
    return gelu_expr(x, a.get_or<std::string>("approximate", "none"));
  });
}

}  // namespace kiln
