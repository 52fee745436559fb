// Unary pointwise ops: those of dsl/ops/unary_ops.h's list, gelu (an attribute picks its form;
// its math is in math_functions.h) with its derivative gelu_backward (two inputs), and isfinite.
#include "dsl/halide_def.h"
#include "dsl/ops/math_functions.h"
#include "dsl/ops/op_tables.h"
#include "dsl/ops/unary_ops.h"

namespace kiln {

using Halide::Expr;

namespace {

Expr one(const Expr& x) { return Halide::Internal::make_one(x.type()); }
Expr sigmoid_expr(Expr x) { return one(x) / (one(x) + Halide::exp(-x)); }

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
  d.pointwise = KILN_HALIDE([](const std::vector<Expr>& in, const Attrs& a) {
    return in[0] * gelu_grad_expr(in[1], a.get_or<std::string>("approximate", "none"));
  });
  return d;
}

// isfinite(x): true where x is neither infinite nor NaN (false for none of an integer tensor).
// Halide::is_finite tests the bits: Halide compiles float math with LLVM's no-NaN and no-inf
// flags, under which a comparison such as x == x or abs(x) < inf may be folded to true.
OpDef isfinite_op() {
  OpDef d;
  d.name = "isfinite";
  d.schedule_class = ScheduleClass::pointwise;
  d.family = KernelFamily::unary;
  d.num_inputs = 1;
  d.differentiable = false;
  d.comparison = true;
  d.cheap = true;
  d.compute_dtype = [](const std::vector<TensorMeta>& in) { return in[0].dtype; };
  d.infer = [](const std::vector<TensorMeta>& in, const Attrs&) {
    return std::vector<TensorMeta>{{in[0].shape, DType::bool_, in[0].device}};
  };
  d.pointwise = KILN_HALIDE([](const std::vector<Expr>& in, const Attrs&) {
    return in[0].type().is_float() ? Halide::is_finite(in[0]) : Halide::Internal::const_true();
  });
  return d;
}

// Registers the op and returns it, for properties set by its table line.
OpDef& unary(std::vector<OpDef>& defs, std::string name, bool float_only, std::function<Expr(Expr, const Attrs&)> f) {
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
  d.pointwise = KILN_HALIDE([f](const std::vector<Expr>& in, const Attrs& a) { return f(in[0], a); });
  defs.push_back(std::move(d));
  return defs.back();
}

}  // namespace

void KILN_OP_TABLES::add_unary_ops(std::vector<OpDef>& defs) {
  using A [[maybe_unused]] = const Attrs&;  // unused where KILN_HALIDE drops the definitions
  constexpr bool same = false, floating = true;  // unary_ops.h's result column: float only?
#define KILN_DEFINE_UNARY(name, result, is_cheap, definition, derivative) \
  unary(defs, #name, result, KILN_HALIDE([](Expr x, A) { return definition; })).cheap = is_cheap;
  KILN_UNARY_OPS(KILN_DEFINE_UNARY)
#undef KILN_DEFINE_UNARY
  unary(defs, "gelu", true, KILN_HALIDE([](Expr x, A a) {
    return gelu_expr(x, a.get_or<std::string>("approximate", "none"));
  }));
  defs.push_back(gelu_backward_op());
  defs.push_back(isfinite_op());
}

}  // namespace kiln
