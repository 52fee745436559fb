// Unary pointwise ops: one table entry each (name, Halide expression, dtype rule).
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

using Halide::Expr;

namespace {

// erf for f32: rational approximation with |error| < 1.2e-7 (Numerical Recipes' erfc form);
// f64 calls the C library's erf so double-precision checks stay exact.
Expr erf_expr(Expr x) {
  if (x.type() == Halide::Float(64))
    return Halide::Internal::Call::make(x.type(), "erf", {x}, Halide::Internal::Call::PureExtern);
  Expr z = Halide::abs(x);
  Expr t = 1.0f / (1.0f + 0.5f * z);
  Expr poly = -z * z - 1.26551223f +
              t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
              t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f +
              t * 0.17087277f))))))));
  Expr erfc = t * Halide::exp(poly);
  return Halide::select(x >= 0, 1.0f - erfc, erfc - 1.0f);
}

Expr one(const Expr& x) { return Halide::Internal::make_one(x.type()); }
Expr sigmoid_expr(Expr x) { return one(x) / (one(x) + Halide::exp(-x)); }

Expr gelu_expr(Expr x, const std::string& approximate) {
  Expr half = Halide::cast(x.type(), Expr(0.5));
  if (approximate == "tanh") {
    Expr k = Halide::cast(x.type(), Expr(0.7978845608028654));  // sqrt(2/pi)
    Expr c = Halide::cast(x.type(), Expr(0.044715));
    return half * x * (one(x) + Halide::tanh(k * (x + c * x * x * x)));
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
  unary(defs, "sin", true, [](Expr x, A) { return Halide::sin(x); });
  unary(defs, "cos", true, [](Expr x, A) { return Halide::cos(x); });
  unary(defs, "tanh", true, [](Expr x, A) { return Halide::tanh(x); });
  unary(defs, "sigmoid", true, [](Expr x, A) { return sigmoid_expr(x); });
  unary(defs, "silu", true, [](Expr x, A) { return x * sigmoid_expr(x); });
  unary(defs, "reciprocal", true, [](Expr x, A) { return one(x) / x; });
  unary(defs, "gelu", true, [](Expr x, A a) {
    return gelu_expr(x, a.get_or<std::string>("approximate", "none"));
  });
}

}  // namespace kiln
