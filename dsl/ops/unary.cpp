// Unary pointwise ops: one table entry each (name, Halide expression, dtype rule); also gelu's
// derivative (gelu_backward, two inputs), whose math sits beside gelu's.
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

// d/dx gelu(x): Phi(x) + x phi(x) (the normal CDF and density), or for the tanh form with
// u = k (x + c x^3), t = tanh(u): (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2.
Expr gelu_grad_expr(Expr x, const std::string& approximate) {
  auto f = [&](double v) { return Halide::cast(x.type(), Expr(v)); };
  if (approximate == "tanh") {
    Expr k = f(0.7978845608028654), c = f(0.044715);
    Expr t = tanh_expr(k * (x + c * x * x * x));
    return f(0.5) * (one(x) + t) + f(0.5) * x * (one(x) - t * t) * k * (one(x) + f(3.0) * c * x * x);
  }
  Expr cdf = f(0.5) * (one(x) + erf_expr(x * f(0.7071067811865476)));
  Expr pdf = Halide::exp(f(-0.5) * x * x) * f(0.3989422804014327);  // 1 / sqrt(2 pi)
  return cdf + x * pdf;
}

void check_approximate(const std::string& op, const Attrs& a) {
  const auto& ap = a.get_or<std::string>("approximate", "none");
  KILN_CHECK(ap == "none" || ap == "tanh", op, ": approximate must be 'none' or 'tanh', got '", ap, "'");
}

// gelu_backward(grad, x) = grad * d/dx gelu(x): gelu's derivative as one pointwise op (composed
// from Tensor ops it took ten kernels over [8192, 3072] in GPT-2's eager step, 0.9 ms each).
OpDef gelu_backward_op() {
  OpDef d;
  d.name = "gelu_backward";
  d.schedule_class = ScheduleClass::pointwise;
  d.family = KernelFamily::binary;
  d.num_inputs = 2;
  d.differentiable = false;  // runs inside a backward only
  d.compute_dtype = [](const std::vector<TensorMeta>& in) { return to_floating(result_type(in)); };
  d.infer = [](const std::vector<TensorMeta>& in, const Attrs& a) {
    check_approximate("gelu_backward", a);
    DType t = to_floating(result_type(in));
    return std::vector<TensorMeta>{{broadcast_all("gelu_backward", in), t, common_device("gelu_backward", in)}};
  };
  d.pointwise = [](const std::vector<Expr>& in, const Attrs& a) {
    return in[0] * gelu_grad_expr(in[1], a.get_or<std::string>("approximate", "none"));
  };
  return d;
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
    if (name == "gelu") check_approximate(name, a);
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
  defs.push_back(gelu_backward_op());
}

}  // namespace kiln
