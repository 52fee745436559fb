#include "dsl/ops/math_functions.h"

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dsl/composite_math.h"

namespace kiln {

using namespace Halide;

namespace {

Expr constant(Type t, double v) { return cast(t, Expr(v)); }

// c[0] + z * (c[1] + z * (...)), Horner's rule.
Expr horner(Expr z, const std::vector<double>& c) {
  Expr acc = constant(z.type(), c.back());
  for (size_t i = c.size() - 1; i-- > 0;) acc = constant(z.type(), c[i]) + z * acc;
  return acc;
}

// Taylor coefficients of sin(r)/r and cos(r) in r^2, enough terms for |r| <= pi/4.
std::vector<double> sin_coefficients(int terms) {
  std::vector<double> c;
  double f = 1;
  for (int k = 0; k < terms; ++k) {
    c.push_back((k % 2 ? -1.0 : 1.0) / f);
    f *= double(2 * k + 2) * double(2 * k + 3);
  }
  return c;
}

std::vector<double> cos_coefficients(int terms) {
  std::vector<double> c;
  double f = 1;
  for (int k = 0; k < terms; ++k) {
    c.push_back((k % 2 ? -1.0 : 1.0) / f);
    f *= double(2 * k + 1) * double(2 * k + 2);
  }
  return c;
}

// x = k * pi/2 + r with |r| <= pi/4; returns r and the quadrant k mod 4. f32 reduces in f64
// (exact enough for any |x| a model sees); f64 uses a two-part pi/2 whose high part has
// trailing zero bits, so k * high is exact (Cody and Waite's method).
std::pair<Expr, Expr> reduce_quarter_turns(Expr x) {
  bool wide = x.type() == Float(64);
  Expr xd = cast(Float(64), x);
  Expr k = round(xd * Expr(2 / M_PI));
  Expr r;
  if (wide) {
    const double pio2_hi = 1.57079632673412561417e+00, pio2_lo = 6.07710050650619224932e-11;
    r = strict_float((xd - k * Expr(pio2_hi)) - k * Expr(pio2_lo));  // no reassociation
  } else {
    r = cast(Float(32), xd - k * Expr(M_PI / 2));
  }
  return {r, cast(Int(32), cast(Int(64), k) & 3)};
}

Expr sin_cos(Expr x, bool is_cos) {
  auto [r, q] = reduce_quarter_turns(x);
  bool wide = x.type() == Float(64);
  Expr r2 = r * r;
  Expr s = r * horner(r2, sin_coefficients(wide ? 9 : 5));
  Expr c = horner(r2, cos_coefficients(wide ? 10 : 6));
  if (is_cos) q = (q + 1) & 3;  // cos(x) = sin(x + pi/2)
  Expr v = select(q == 0, s, q == 1, c, q == 2, -s, -c);
  return select(is_inf(x), constant(x.type(), NAN), v);
}

}  // namespace

Expr erf_expr(Expr x) {
  if (x.type() == Float(64)) return Internal::Call::make(x.type(), "erf", {x}, Internal::Call::PureExtern);
  // Rational approximation of erfc with |relative error| < 1.2e-7 (Numerical Recipes' erfc form).
  Expr z = abs(x);
  Expr t = 1.0f / (1.0f + 0.5f * z);
  Expr poly = -z * z + horner(t, {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                   0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277});
  Expr erfc = t * exp(poly);
  return select(x >= 0, 1.0f - erfc, erfc - 1.0f);
}

Expr tanh_expr(Expr x) {
  Type t = x.type();
  Expr ax = abs(x);
  Expr e = exp(constant(t, -2) * ax);
  Expr large = (constant(t, 1) - e) / (constant(t, 1) + e);
  // Near 0, 1 - e cancels: use the Taylor series x - x^3/3 + 2x^5/15 - 17x^7/315 + ...
  Expr x2 = x * x;
  Expr small = x * horner(x2, {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925});
  Expr v = select(ax < constant(t, 0.125), small, select(x < 0, -large, large));
  return select(is_nan(x), x, v);
}

namespace {

Expr one(const Expr& x) { return Internal::make_one(x.type()); }

// gelu(x) = x (1 + s(x)) / 2 with s(x) = erf(x / sqrt 2), or in the tanh form
// s(x) = tanh(u), u = sqrt(2 / pi) (x + 0.044715 x^3).
Expr gelu_s(const Expr& x, const std::string& approximate) {
  Type t = x.type();
  if (approximate == "tanh") return tanh_expr(constant(t, kGeluScale) * (x + constant(t, kGeluCubic) * x * x * x));
  return erf_expr(x * constant(t, 0.7071067811865476));
}

}  // namespace

Expr gelu_expr(Expr x, const std::string& approximate) {
  return constant(x.type(), 0.5) * x * (one(x) + gelu_s(x, approximate));
}

// d/dx gelu(x) = (1 + s) / 2 + x s'(x) / 2: s' = 2 phi(x) for erf (phi the normal density), and
// (1 - s^2) k (1 + 3 c x^2) for the tanh form (k = kGeluScale, c = kGeluCubic).
Expr gelu_grad_expr(Expr x, const std::string& approximate) {
  Type t = x.type();
  Expr half = constant(t, 0.5), s = gelu_s(x, approximate);
  if (approximate == "tanh")
    return half * (one(x) + s) +
           half * x * (one(x) - s * s) * constant(t, kGeluScale) * (one(x) + constant(t, 3 * kGeluCubic) * x * x);
  Expr pdf = exp(constant(t, -0.5) * x * x) * constant(t, 0.3989422804014327);  // 1 / sqrt(2 pi)
  return half * (one(x) + s) + x * pdf;
}

Expr sin_expr(Expr x) { return sin_cos(x, false); }
Expr cos_expr(Expr x) { return sin_cos(x, true); }

namespace {

// Replaces every call of the C-library or runtime function `name` returning `type` by `by(args)`.
class ReplaceExternCall : public Internal::IRMutator {
 public:
  ReplaceExternCall(std::string name, Type type, std::function<Expr(const std::vector<Expr>&)> by)
      : name_(std::move(name)), type_(type), by_(std::move(by)) {}

 private:
  using IRMutator::visit;
  Expr visit(const Internal::Call* op) override {
    Expr e = IRMutator::visit(op);
    const auto* c = e.as<Internal::Call>();
    if (c && c->call_type == Internal::Call::PureExtern && c->name == name_ && c->type == type_) return by_(c->args);
    return e;
  }
  std::string name_;
  Type type_;
  std::function<Expr(const std::vector<Expr>&)> by_;
};

// Applies m to the definitions of `outputs` and of every Func they call.
void mutate_all(const std::vector<Func>& outputs, Internal::IRMutator& m) {
  std::map<std::string, Internal::Function> all;
  for (const Func& f : outputs) {
    all.emplace(f.name(), f.function());
    for (const auto& [name, fn] : Internal::find_transitive_calls(f.function())) all.emplace(name, fn);
  }
  for (auto& [name, fn] : all) fn.mutate(&m);
}

}  // namespace

void use_libdevice_math(const std::vector<Func>& outputs) {
  ReplaceExternCall erf("erf", Float(64), [](const std::vector<Expr>& a) {
    return Internal::Call::make(Float(64), "__nv_erf", a, Internal::Call::PureExtern);
  });
  mutate_all(outputs, erf);
}

}  // namespace kiln
