#include "dsl/halide_adjoint.h"

#include <map>
#include <set>
#include <string>

#include "dsl/error.h"

namespace kiln {

using namespace Halide;
using Halide::Internal::Call;
using Halide::Internal::Function;
using Halide::Internal::IRMutator;
using Halide::Internal::IRVisitor;
using Halide::Internal::Variable;

namespace {

// The derivative Func's value with every intermediate Func Halide made inlined, and calls to the
// leaves (the op's inputs, the output's adjoint) replaced by placeholder variables. Any other
// variable left over (the element's index) means the derivative is not pointwise.
class Inline : public IRMutator {
 public:
  Inline(const std::map<std::string, Function>& env, std::map<std::string, Expr> leaves, std::string_view op)
      : env_(env), leaves_(std::move(leaves)), op_(op) {}

  Expr value_of(const Function& f) {
    KILN_CHECK(f.updates().empty() && f.has_pure_definition() && f.values().size() == 1, op_,
               ": Halide's derivative of its definition has a reduction (", f.name(),
               "), so it is not pointwise; give the op a derivative rule (HalideOp::backward)");
    return mutate(Internal::substitute_in_all_lets(f.values()[0]));
  }

 protected:
  using IRMutator::visit;
  Expr visit(const Call* c) override {
    if (c->call_type != Call::Halide) return IRMutator::visit(c);
    if (auto leaf = leaves_.find(c->name); leaf != leaves_.end()) return leaf->second;
    auto f = env_.find(c->name);
    KILN_CHECK(f != env_.end(), op_, ": Halide's derivative calls ", c->name, ", which it did not define");
    return value_of(f->second);
  }

 private:
  const std::map<std::string, Function>& env_;
  std::map<std::string, Expr> leaves_;
  std::string_view op_;
};

class FreeVariables : public IRVisitor {
 public:
  std::set<std::string> names;

 protected:
  using IRVisitor::visit;
  void visit(const Variable* v) override {
    if (!v->param.defined() && !v->reduction_domain.defined()) names.insert(v->name);
  }
};

}  // namespace

Expr pointwise_adjoint(const PointwiseDef& f, const std::vector<Expr>& values, const Expr& grad, int input,
                       const Attrs& attrs, std::string_view op) {
  KILN_CHECK(input >= 0 && size_t(input) < values.size(), op, ": no input ", input, " to differentiate");
  KILN_CHECK(values[size_t(input)].type().is_float(), op, ": input ", input, " is ", values[size_t(input)].type(),
             ", not floating point; it has no gradient");
  // The op over one-dimensional leaves (each input a Func reading a placeholder buffer), and its
  // adjoint; the derivative is taken of that small pipeline, then its leaves are replaced by the
  // values given.
  Var x("x");
  std::vector<Func> leaves;
  std::vector<Expr> reads;
  std::map<std::string, Expr> placeholders;
  for (size_t k = 0; k < values.size(); ++k) {
    ImageParam buffer(values[k].type(), 1);
    Func leaf;
    leaf(x) = buffer(x);
    leaves.push_back(leaf);
    reads.push_back(leaf(x));
    placeholders[leaf.name()] = Variable::make(values[k].type(), "kiln_value_" + std::to_string(k));
  }
  Expr value = f(reads, attrs);
  const Type type = value.type();
  KILN_CHECK(type.is_float(), op, ": its definition's value is ", type, ", not floating point; it has no gradient");
  Func y;
  y(x) = value;
  ImageParam adjoint_buffer(type, 1);
  Func adjoint;
  adjoint(x) = adjoint_buffer(x);
  placeholders[adjoint.name()] = Variable::make(type, "kiln_grad");
  // Halide 14 reads the bounds as {min, max} (with {min, extent} its derivative read one element
  // past the end: measured); a symbolic one keeps it from specializing the element's index.
  Param<int> lo, hi;
  Derivative d = propagate_adjoints(y, adjoint, {{lo, hi}});
  Func dx = d(leaves[size_t(input)]);
  if (!dx.defined()) return Internal::make_zero(values[size_t(input)].type());
  std::map<std::string, Function> env = Internal::find_transitive_calls(dx.function());
  Expr e = Inline(env, placeholders, op).value_of(dx.function());
  FreeVariables free;
  e.accept(&free);
  for (const std::string& v : free.names)
    KILN_CHECK(v.rfind("kiln_value_", 0) == 0 || v == "kiln_grad", op,
               ": Halide's derivative of its definition depends on the element's index (", v,
               "), so it is not pointwise; give the op a derivative rule (HalideOp::backward)");
  std::map<std::string, Expr> actual;
  actual["kiln_grad"] = cast(type, grad);
  for (size_t k = 0; k < values.size(); ++k) actual["kiln_value_" + std::to_string(k)] = values[k];
  return cast(values[size_t(input)].type(), Internal::simplify(Internal::substitute(actual, e)));
}

Func tensor_adjoint(const HalideTensor& out, const HalideTensor& grad, const HalideTensor& input, std::string_view op) {
  const Type type = out.func.output_types().at(0);
  const Type input_type = input.func.output_types().at(0);
  KILN_CHECK(out.func.outputs() == 1 && type.is_float(), op, ": its definition's value is ", type,
             ", not floating point; it has no gradient");
  KILN_CHECK(input_type.is_float(), op, ": an input is ", input_type, ", not floating point; it has no gradient");
  std::vector<Var> v = halide_vars(out.rank());
  std::string base(op);
  for (char& c : base)
    if (c == ':') c = '_';
  Func dy(base + "_dy");
  dy(v) = cast(type, grad.func(v));
  // Zero outside the output: an input element read from past the output's edge (x(i + 1) at the
  // last i) gathers dy there, which no output element holds (Halide 14 does not bound it).
  Region extents, bounds;  // innermost first; bounds as {min, max}: Halide 14 reads them so (pointwise_adjoint)
  for (int d = out.rank() - 1; d >= 0; --d) {
    extents.push_back({0, out.shape[size_t(d)]});
    bounds.push_back({0, out.shape[size_t(d)] - 1});
  }
  Func adjoint = out.rank() == 0 ? dy : BoundaryConditions::constant_exterior(dy, Internal::make_zero(type), extents);
  Derivative d = propagate_adjoints(out.func, adjoint, bounds);
  Func dx = d(input.func);
  std::vector<Var> iv = halide_vars(input.rank());
  Func result(base + "_grad");
  if (dx.defined()) result(iv) = cast(input_type, dx(iv));
  else result(iv) = Internal::make_zero(input_type);
  return result;
}

}  // namespace kiln
