// gradcheck (f64 finite differences) for every op with a derivative rule, on several shapes,
// with broadcasting and non-contiguous inputs. A rule without a case here fails the last test.
#include <set>

#include "autograd/derivatives.h"
#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::set<std::string>& covered() {
  static std::set<std::string> s;
  return s;
}

Tensor leaf(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(s, f64, seed, lo, hi).requires_grad_();
}

// A leaf of shape `s` whose last two dims are swapped in memory (a non-contiguous view).
Tensor transposed_leaf(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
  Shape swapped = s;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor base = leaf(swapped, seed, lo, hi);
  return base.transpose(-1, -2).detach().requires_grad_();
}

void check(const std::string& op, const std::function<Tensor(const TensorList&)>& fn, const TensorList& in,
           const std::string& what = "", const GradcheckOptions& opts = {}) {
  covered().insert(op);
  GradcheckResult r = gradcheck(fn, in, opts);
  BOOST_TEST(r.ok, op << " " << what << ": " << r.message);
}

// gradcheck of call(operands) with respect to its defined float operands; the others (indices,
// masks, an absent weight) stay as they are.
void check_float_operands(const std::string& op, const std::function<Tensor(const TensorList&)>& call,
                          const TensorList& operands, const std::string& what, const GradcheckOptions& opts = {}) {
  TensorList leaves;
  std::vector<size_t> at;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].defined() || !is_floating(operands[i].dtype())) continue;
    at.push_back(i);
    leaves.push_back(operands[i].detach().requires_grad_());
  }
  check(op, [&call, operands, at](const TensorList& in) {
    TensorList full = operands;
    for (size_t k = 0; k < at.size(); ++k) full[at[k]] = in[k];
    return call(full);
  }, leaves, what, opts);
}

using Fn1 = Tensor (*)(const Tensor&);

}  // namespace

BOOST_AUTO_TEST_CASE(unary_ops) {
  uint64_t seed = 1;
  for (const UnaryOpEntry& c : unary_op_db()) {
    for (const Shape& s : std::vector<Shape>{{}, {5}, {3, 4}}) {
      Tensor x = leaf(s, seed++, c.grad_lo, c.grad_hi);
      check(c.op, [&](const TensorList& in) { return c.call(in[0]); }, {x}, c.label + " " + to_string(s));
    }
    Tensor xt = transposed_leaf({4, 3}, seed++, c.grad_lo, c.grad_hi);
    check(c.op, [&](const TensorList& in) { return c.call(in[0]); }, {xt}, c.label + " transposed");
  }
  // abs and relu on both sides of the kink
  Tensor x = leaf({6}, 99);
  check("abs", [](const TensorList& in) { return abs(in[0]); }, {x}, "both signs");
  check("relu", [](const TensorList& in) { return relu(in[0]); }, {x}, "both signs");
}

BOOST_AUTO_TEST_CASE(binary_ops_with_broadcasting) {
  std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 3}, {4, 1}}, {{}, {5}}};
  uint64_t seed = 200;
  for (const BinaryOpEntry& c : binary_op_db()) {
    if (!op_def(c.op).differentiable) continue;
    for (const auto& [sa, sb] : shapes) {
      auto [alo, ahi, blo, bhi] = c.gradient_ranges();
      Tensor a = leaf(sa, seed++, alo, ahi), b = leaf(sb, seed++, blo, bhi);
      check(c.op, [&](const TensorList& in) { return c.call(in[0], in[1]); }, {a, b},
            to_string(sa) + " " + to_string(sb));
    }
  }
  Tensor a = leaf({9, 11}, 300, 0.5, 2).slice(0, 1, 9, 2).slice(1, 0, 10, 2).detach().requires_grad_();
  Tensor b = transposed_leaf({4, 5}, 301, 0.5, 2);
  check("mul", [](const TensorList& in) { return in[0] * in[1]; }, {a, b}, "views");
}

// The differentiable ops of the database by sample operands (where, a cast between floats, cat,
// embedding, contiguous), with respect to every float operand.
BOOST_AUTO_TEST_CASE(sample_ops) {
  uint64_t seed = 320;
  for (const SampleOpEntry& e : sample_op_db()) {
    if (!e.differentiable) continue;
    // Through f32 the function is only f32-accurate: wider steps and tolerances.
    GradcheckOptions opts;
    if (e.result_dtype(f64) != f64) opts = {.eps = 1e-2, .atol = 1e-4, .rtol = 1e-3};
    check_float_operands(e.op, [&e](const TensorList& v) { return e.call(v).to(f64); }, e.inputs(f64, seed++), e.label,
                         opts);
  }
}

BOOST_AUTO_TEST_CASE(maximum_splits_ties_evenly) {
  Tensor a = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = from_vector<double>({1, 5, 0}).requires_grad_();
  maximum(a, b).sum().backward();
  check_close(a.grad(), {0.5, 0, 1}, {3}, "d max / d a");
  check_close(b.grad(), {0.5, 1, 0}, {3}, "d max / d b");
  covered().insert("maximum");
}

BOOST_AUTO_TEST_CASE(views_and_reductions) {
  uint64_t seed = 400;
  Tensor x = leaf({2, 3, 4}, seed++);
  auto one = [&](const char* op, std::function<Tensor(const Tensor&)> f) {
    check(op, [&](const TensorList& in) { return f(in[0]); }, {x});
    Tensor xt = transposed_leaf({2, 4, 3}, seed++);
    check(op, [&](const TensorList& in) { return f(in[0].transpose(1, 2)); }, {xt}, "on a view");
  };
  for (const ViewOpEntry& e : view_op_db()) {  // each view of the database, of a leaf and of a transposed leaf
    auto f = [&e](const TensorList& in) { return e.call(in[0]) * 1.0; };
    check(e.op, f, {leaf(e.base, seed++)}, e.label);
    if (e.any_layout) check(e.op, f, {transposed_leaf(e.base, seed++)}, e.label + " of a transposed leaf");
  }
  one("expand", [](const Tensor& t) { return t.unsqueeze(0).expand({3, 2, 3, 4}) * 1.0; });
  one("slice", [](const Tensor& t) { return t.slice(2, 0, 4, 3) * 1.0; });
  one("sum", [](const Tensor& t) { return sum(t, {0, 2}); });
  one("sum", [](const Tensor& t) { return sum(t, {1}, true); });
  one("sum", [](const Tensor& t) { return sum(t); });
  one("mean", [](const Tensor& t) { return mean(t, {-1}); });
  one("mean", [](const Tensor& t) { return mean(t, {0, 1}, true); });
}

// The matrix products of the op database small enough for finite differences, with respect to
// every operand.
BOOST_AUTO_TEST_CASE(matmul_shapes) {
  uint64_t seed = 500;
  int checked = 0;
  for (const MatmulOpEntry& e : matmul_op_db()) {
    if (numel(e.a) + numel(e.b) > 600) continue;
    TensorList in = e.inputs(f64, seed);
    seed += 3;
    for (Tensor& t : in) t = t.detach().requires_grad_();
    check(e.op, [&e](const TensorList& v) { return e.call(v); }, in, e.label);
    ++checked;
  }
  BOOST_TEST(checked >= int(matmul_op_db().size()) * 2 / 3);  // the cap leaves most of them
}

BOOST_AUTO_TEST_CASE(reductions_and_normalizations) {
  uint64_t seed = 600;
  auto on = [&](const char* op, const Shape& s, std::function<Tensor(const Tensor&)> f) {
    check(op, [&](const TensorList& in) { return f(in[0]); }, {leaf(s, seed++)}, to_string(s));
    if (s.size() >= 2)
      check(op, [&](const TensorList& in) { return f(in[0]); }, {transposed_leaf(s, seed++)}, "transposed");
  };
  for (const ReductionOpEntry& c : reduction_op_db()) {  // a row, a column, several and all dims
    on(c.op.c_str(), {3, 5}, [&c](const Tensor& t) { return c.call(t, {1}, false); });
    on(c.op.c_str(), {3, 5}, [&c](const Tensor& t) { return c.call(t, {0}, true); });
    on(c.op.c_str(), {2, 3, 4}, [&c](const Tensor& t) { return c.call(t, {0, 2}, true); });
    on(c.op.c_str(), {4}, [&c](const Tensor& t) { return c.call(t, {}, false); });
  }
  // The row ops of the database at their first (small) shape, contiguous and transposed, with
  // respect to every float operand (a layer norm's weight and bias too).
  for (const RowOpEntry& e : row_op_db()) {
    for (const std::string kind : {"", "transposed"}) {
      check_float_operands(e.op, e.call, e.inputs(e.shapes[0], f64, seed++, kind), e.label + " " + kind);
    }
  }
  on("softmax", {2, 3, 4}, [](const Tensor& t) { return softmax(t, 1); });  // a dim in the middle
  check("cross_entropy", [&](const TensorList& in) { return cross_entropy(in[0], from_vector<int64_t>({3}, {})); },
        {leaf({5}, seed++)}, "unbatched");
  Tensor aq = leaf({1, 2, 5, 3}, seed++), ak = leaf({1, 2, 5, 3}, seed++), av = leaf({1, 2, 5, 2}, seed++);
  for (bool causal : {true, false})
    check("attention", [=](const TensorList& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); },
          {aq, ak, av}, causal ? "causal" : "unmasked");
  check("attention", [](const TensorList& in) { return scaled_dot_product_attention(in[0], in[1], in[2], false, 0.7); },
        {leaf({2, 1, 3, 4}, seed++), leaf({2, 1, 6, 4}, seed++), leaf({2, 1, 6, 3}, seed++)}, "3 queries, 6 keys");
  Tensor c1 = leaf({2, 3}, seed++);
  check("cat", [](const TensorList& in) { return stack({in[0], in[0] * 2.0}, 0); }, {c1}, "stack");
}

BOOST_AUTO_TEST_CASE(max_splits_ties_evenly) {
  Tensor x = from_vector<double>({3, 1, 3, 2}).requires_grad_();
  max(x).backward();
  check_close(x.grad(), {0.5, 0, 0.5, 0}, {4}, "d max / d x");
}

BOOST_AUTO_TEST_CASE(every_rule_has_a_gradcheck_case) {
  for (const std::string& op : ops_with_derivatives())
    BOOST_TEST(covered().count(op) == 1u, "op " << op << " has a derivative rule but no gradcheck case");
}

// The table checks itself against the registry when it is built (derivatives.cpp); this is
// where that check runs in the suite, and where a missing rule shows by name.
BOOST_AUTO_TEST_CASE(every_differentiable_op_has_a_rule) {
  std::vector<std::string> rules = ops_with_derivatives();
  for (const OpDef* d : all_op_defs()) {
    bool has = std::find(rules.begin(), rules.end(), d->name) != rules.end();
    BOOST_TEST(has == is_differentiable(*d), "op " << d->name << ": differentiable " << is_differentiable(*d)
                                                      << " but a rule " << (has ? "exists" : "is missing"));
  }
  BOOST_CHECK_THROW(derivative_rule(op_def("argmax")), Error);
}
