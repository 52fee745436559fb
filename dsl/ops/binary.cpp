// Binary and ternary pointwise ops with numpy broadcasting and type promotion: one table entry
// each (name, Halide expression, dtype rule).
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

using Halide::Expr;

namespace {

enum class Result { promoted, floating, boolean };

// Registers the op and returns it, for properties set by its table line.
OpDef& binary(std::vector<OpDef>& defs, std::string name, Result result, std::function<Expr(Expr, Expr)> f) {
  OpDef d;
  d.name = name;
  d.schedule_class = ScheduleClass::pointwise;
  d.family = KernelFamily::binary;
  d.num_inputs = 2;
  auto compute = [result](const std::vector<TensorMeta>& in) {
    DType t = result_type(in);
    return result == Result::floating ? to_floating(t) : t;
  };
  d.compute_dtype = compute;
  d.infer = [name, result, compute](const std::vector<TensorMeta>& in, const Attrs&) {
    Device dev = common_device(name, in);
    Shape s = broadcast_all(name, in);
    DType t = result == Result::boolean ? DType::bool_ : compute(in);
    return std::vector<TensorMeta>{{s, t, dev}};
  };
  d.pointwise = KILN_HALIDE([f](const std::vector<Expr>& in, const Attrs&) { return f(in[0], in[1]); });
  d.differentiable = result != Result::boolean;  // comparisons: piecewise constant
  d.comparison = d.cheap = result == Result::boolean;
  defs.push_back(std::move(d));
  return defs.back();
}

}  // namespace

void KILN_OP_TABLES::add_binary_ops(std::vector<OpDef>& defs) {
  using R = Result;
  binary(defs, "add", R::promoted, KILN_HALIDE([](Expr a, Expr b) { return a + b; })).cheap = true;
  binary(defs, "sub", R::promoted, KILN_HALIDE([](Expr a, Expr b) { return a - b; })).cheap = true;
  binary(defs, "mul", R::promoted, KILN_HALIDE([](Expr a, Expr b) { return a * b; })).cheap = true;
  binary(defs, "div", R::floating, KILN_HALIDE([](Expr a, Expr b) { return a / b; }));
  binary(defs, "pow", R::floating, KILN_HALIDE([](Expr a, Expr b) { return Halide::pow(a, b); }));
  binary(defs, "maximum", R::promoted, KILN_HALIDE([](Expr a, Expr b) { return Halide::max(a, b); })).cheap = true;
  binary(defs, "minimum", R::promoted, KILN_HALIDE([](Expr a, Expr b) { return Halide::min(a, b); })).cheap = true;
  binary(defs, "eq", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a == b; }));
  binary(defs, "ne", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a != b; }));
  binary(defs, "lt", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a < b; }));
  binary(defs, "le", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a <= b; }));
  binary(defs, "gt", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a > b; }));
  binary(defs, "ge", R::boolean, KILN_HALIDE([](Expr a, Expr b) { return a >= b; }));

  OpDef w;
  w.name = "where";
  w.schedule_class = ScheduleClass::pointwise;
  w.family = KernelFamily::where;
  w.condition_input = 0;
  w.num_inputs = 3;
  w.compute_dtype = [](const std::vector<TensorMeta>& in) {
    return result_type({in[1], in[2]});
  };
  w.infer = [](const std::vector<TensorMeta>& in, const Attrs&) {
    Device dev = common_device("where", in);
    KILN_CHECK(in[0].dtype == DType::bool_, "where: condition must have dtype bool, got ", in[0].dtype);
    return std::vector<TensorMeta>{{broadcast_all("where", in), result_type({in[1], in[2]}), dev}};
  };
  // A bitwise choice, not Halide::select: when the condition is one value for the whole output (a
  // GradScaler's found-inf flag), Halide 14's skip-stages pass turns a select into a host-side
  // branch that reads the condition from host memory, which on CUDA is a device-only buffer (a
  // null read; tests/cuda/test_mixed_precision.cpp). The bits of the chosen operand are kept
  // exactly, inf and NaN included.
  w.pointwise = KILN_HALIDE([](const std::vector<Expr>& in, const Attrs&) {
    Expr c = in[0] != 0;
    Halide::Type t = in[1].type(), bits = Halide::UInt(t.bits());
    if (t.is_bool()) return (c && in[1]) || (!c && in[2]);
    Expr take_a = Halide::cast(bits, 0) - Halide::cast(bits, c);  // all ones or zero
    Expr a = Halide::reinterpret(bits, in[1]), b = Halide::reinterpret(bits, in[2]);
    return Halide::reinterpret(t, (a & take_a) | (b & ~take_a));
  });
  w.cheap = true;
  defs.push_back(std::move(w));
}

}  // namespace kiln
