// The op database (tests/support/op_db.h) covers every registered op, by an entry or by naming
// the dedicated suite that tests it, and drives the compiled path's test: each unary, binary,
// reduction, row, view, matmul, creation and sample op compiled (halide backend) against eager,
// forward and backward, and the sample ops eagerly against their references (the other entries'
// eager suites are the op families' own test files). The gradcheck and CUDA suites iterate over
// the same entries.
#include <filesystem>
#include <functional>
#include <set>

#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// fn (a function of tensors that returns a scalar) compiled on the halide backend (named after
// `op`) against eager at `in`, forward and the gradients of its float operands. `names` numbers
// the operands in the messages (their index in `in` when empty).
void check_compiled_operands_against_eager(const std::function<Tensor(const TensorList&)>& fn, const TensorList& in,
                                           const std::string& op, const std::string& what, Tolerance tol,
                                           const std::vector<size_t>& names = {}) {
  auto f = compile(fn, {.backend = "halide", .name = "op db " + op});
  Tensor want = fn(in);
  check_close(f(in), host_values(want), want.shape(), tol, what + " forward");
  TensorList ie = in, ic = in;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!is_floating(in[k].dtype())) continue;
    ie[k] = in[k].detach().requires_grad_();
    ic[k] = in[k].detach().requires_grad_();
  }
  fn(ie).backward();
  f(ic).backward();
  for (size_t k = 0; k < in.size(); ++k)
    if (is_floating(in[k].dtype()))
      check_close(ic[k].grad(), host_values(ie[k].grad()), in[k].shape(), tol,
                  what + " backward of operand " + std::to_string(names.empty() ? k : names[k]));
}

// The same for a function of one tensor.
void check_compiled_against_eager(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                                  const std::string& op, const std::string& what) {
  check_compiled_operands_against_eager([&fn](const TensorList& v) { return fn(v[0]); }, {x}, op, what,
                                        compiled_against_eager(x.dtype()));
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_registered_op_has_an_entry_or_a_dedicated_suite) {
  std::set<std::string> listed;
  for (const UnaryOpEntry& e : unary_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((e.lo < e.hi && e.grad_lo < e.grad_hi), e.label);
    BOOST_TEST((op_def(e.op).pointwise && op_def(e.op).num_inputs == 1), e.label << " is not a unary pointwise op");
  }
  for (const BinaryOpEntry& e : binary_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((e.lhs_lo < e.lhs_hi && e.rhs_lo < e.rhs_hi), e.op);
    auto [alo, ahi, blo, bhi] = e.gradient_ranges();  // inside the value ranges
    BOOST_TEST((e.lhs_lo <= alo && alo < ahi && ahi <= e.lhs_hi && e.rhs_lo <= blo && blo < bhi && bhi <= e.rhs_hi), e.op);
    BOOST_TEST((op_def(e.op).pointwise && op_def(e.op).num_inputs == 2), e.op << " is not a binary pointwise op");
  }
  for (const ReductionOpEntry& e : reduction_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((op_def(e.op).schedule_class == ScheduleClass::reduction && op_def(e.op).num_inputs == 1),
               e.label << " is not a reduction of one input");
  }
  for (const CreationOpEntry& e : creation_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((op_def(e.op).schedule_class == ScheduleClass::creation && !e.dtypes.empty()), e.label << " is not a creation op");
  }
  for (const MatmulOpEntry& e : matmul_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((op_def(e.op).schedule_class == ScheduleClass::matmul), e.label << " is not a matmul op");
  }
  for (const ViewOpEntry& e : view_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((op_def(e.op).schedule_class == ScheduleClass::view), e.label << " is not a view op");
  }
  for (const RowOpEntry& e : row_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((!e.shapes.empty() && op_def(e.op).schedule_class == ScheduleClass::normalization), e.label << " is not a normalization op");
  }
  for (const SampleOpEntry& e : sample_op_db()) {
    listed.insert(e.op);
    BOOST_TEST(!(e.differentiable && !op_def(e.op).differentiable), e.label << " is marked differentiable, its op is not");
  }
  std::filesystem::path tests = std::filesystem::path(__FILE__).parent_path() / "..";
  for (const DedicatedSuite& d : dedicated_op_suites()) {
    BOOST_TEST(listed.insert(d.op).second, d.op << " is both in the database and among the dedicated suites");
    BOOST_TEST_REQUIRE(std::filesystem::exists(tests / d.test_file), d.op << ": no test file " << d.test_file);
    BOOST_TEST(file_bytes((tests / d.test_file).string()).find(d.evidence) != std::string::npos,
               d.op << ": " << d.test_file << " no longer contains " << d.evidence);
    (void)op_def(d.op);  // a registered op
  }
  for (const OpDef* d : all_op_defs())
    BOOST_TEST(listed.count(d->name) == 1u, d->name << " has no entry in tests/support/op_db.cpp (a unary or binary "
                                                     "entry, or the dedicated suite that tests it)");
}

BOOST_AUTO_TEST_CASE(compiled_unary_ops_match_eager_forward_and_backward) {
  uint64_t seed = 1;
  for (const UnaryOpEntry& c : unary_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      Tensor x = random_tensor({3, 37}, t, seed++, c.grad_lo, c.grad_hi);
      // The op between other work, as a model has it: the region fuses it with its neighbours.
      check_compiled_against_eager([&c](const Tensor& a) { return sum(c.call(a * 0.5 + 0.25) * 3.0); }, x, c.label,
                                   c.label + " " + std::string(name(t)));
    }
  }
}

BOOST_AUTO_TEST_CASE(compiled_binary_ops_match_eager_forward_and_backward) {
  uint64_t seed = 100;
  for (const BinaryOpEntry& c : binary_op_db()) {
    const OpDef& def = op_def(c.op);
    for (DType t : {DType::f32, DType::f64}) {
      auto [alo, ahi, blo, bhi] = c.gradient_ranges();
      Tensor a = random_tensor({3, 37}, t, seed++, alo, ahi), b = random_tensor({37}, t, seed++, blo, bhi);
      // Broadcast, between other work: a comparison's mask becomes numbers to sum.
      auto fn = [&c, t](const Tensor& x, const Tensor& y) { return sum(c.call(x, y).to(t) * 3.0); };
      auto f = compile(fn, {.backend = "halide", .name = "op db " + c.op});
      Tolerance tol = compiled_against_eager(t);
      std::string what = c.op + " " + std::string(name(t));
      Tensor want = fn(a, b);
      check_close(f(a, b), host_values(want), want.shape(), tol, what + " forward");
      if (!def.differentiable) continue;
      Tensor ae = a.detach().requires_grad_(), be = b.detach().requires_grad_();
      Tensor ac = a.detach().requires_grad_(), bc = b.detach().requires_grad_();
      fn(ae, be).backward();
      f(ac, bc).backward();
      check_close(ac.grad(), host_values(ae.grad()), a.shape(), tol, what + " backward lhs");
      check_close(bc.grad(), host_values(be.grad()), b.shape(), tol, what + " backward rhs");
    }
  }
}

// Each reduction over the last dim, the first, several and all, keepdim both ways, between
// other work, compiled against eager, forward and backward.
BOOST_AUTO_TEST_CASE(compiled_reductions_match_eager_forward_and_backward) {
  uint64_t seed = 300;
  for (const ReductionOpEntry& c : reduction_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      for (const auto& [dims, keepdim] : std::vector<std::pair<std::vector<int64_t>, bool>>{
               {{-1}, false}, {{0}, true}, {{0, 2}, false}, {{}, false}}) {
        Tensor x = random_tensor({3, 37, 5}, t, seed++);
        auto fn = [&c, dims = dims, keepdim = keepdim](const Tensor& a) {
          return sum(c.call(a * 0.5 + 0.25, dims, keepdim) * 3.0);
        };
        check_compiled_against_eager(fn, x, c.label, c.label + " " + std::string(name(t)) + " dims " + to_string(dims));
      }
    }
  }
}

// Each row op between other work, compiled against eager, forward and the gradients of every
// float operand (a layer norm's weight and bias too).
BOOST_AUTO_TEST_CASE(compiled_row_ops_match_eager_forward_and_backward) {
  uint64_t seed = 500;
  for (const RowOpEntry& e : row_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      // The compiled function takes the defined operands (an absent weight or bias stays absent).
      TensorList all = e.inputs({3, 37}, t, seed++, ""), in;
      std::vector<size_t> at;
      for (size_t i = 0; i < all.size(); ++i)
        if (all[i].defined()) {
          at.push_back(i);
          in.push_back(all[i]);
        }
      auto fn = [&e, all, at](const TensorList& v) {
        TensorList full = all;
        for (size_t k = 0; k < at.size(); ++k) full[at[k]] = v[k];
        full[0] = v[0] * 0.5 + 0.25;
        return sum(e.call(full) * 3.0);
      };
      check_compiled_operands_against_eager(fn, in, e.label, e.label + " " + std::string(name(t)),
                                            compiled_against_eager(t), at);
    }
  }
}

// Each view of a value computed in the region, times a random tensor (each element's gradient
// differs), compiled against eager: the view's values and the gradient through it.
BOOST_AUTO_TEST_CASE(compiled_views_match_eager_forward_and_backward) {
  uint64_t seed = 700;
  for (const ViewOpEntry& e : view_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      Tensor x = random_tensor(e.base, t, seed++), r = random_tensor(e.shape, t, seed++);
      auto viewed = [&e, r](const Tensor& a) { return e.call(a * 0.5 + 0.25) * r; };
      auto f = compile(viewed, {.backend = "halide", .name = "op db " + e.label});
      std::string what = e.label + " " + std::string(name(t));
      Tensor want = viewed(x);
      check_close(f(x), host_values(want), want.shape(), compiled_against_eager(t), what + " forward");
      check_compiled_against_eager([&viewed](const Tensor& a) { return sum(viewed(a)); }, x, e.label, what);
    }
  }
}

// Each matrix product of a value computed in the region, compiled against eager, forward and
// the gradients of every operand.
BOOST_AUTO_TEST_CASE(compiled_matmuls_match_eager_forward_and_backward) {
  uint64_t seed = 900;
  for (const MatmulOpEntry& e : matmul_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      TensorList in = e.inputs(t, seed);
      seed += 3;
      auto fn = [&e](const TensorList& v) {
        TensorList shifted = v;
        shifted[0] = v[0] * 0.5 + 0.25;
        return sum(e.call(shifted) * 3.0);
      };
      Tolerance tol = compiled_against_eager(t);
      tol.atol *= double(e.a.back());  // sums of K products, in another order
      check_compiled_operands_against_eager(fn, in, e.label, e.label + " " + std::string(name(t)), tol);
    }
  }
}

// Each creation op inside a compiled function, in its float dtypes (f32, f64), added to an input
// of its shape: the region computes it in place of the eager kernel.
BOOST_AUTO_TEST_CASE(compiled_creation_ops_match_eager) {
  uint64_t seed = 1100;
  for (const CreationOpEntry& e : creation_op_db())
    for (DType t : e.dtypes) {
      if (t != DType::f32 && t != DType::f64) continue;
      Tensor x = random_tensor(e.shape, t, seed++);
      auto fn = [&e](const Tensor& a) { return a * 2.0 + e.call({.dtype = a.dtype()}); };
      auto f = compile(fn, {.backend = "halide", .name = "op db " + e.label});
      Tensor want = fn(x);
      check_close(f(x), host_values(want), want.shape(), compiled_against_eager(t), e.label + " " + std::string(name(t)));
    }
}

// Each op by sample operands against its double reference, in f32 and f64: its values, shape and
// result dtype.
BOOST_AUTO_TEST_CASE(sample_ops_match_their_reference) {
  uint64_t seed = 1300;
  for (const SampleOpEntry& e : sample_op_db())
    for (DType t : {DType::f32, DType::f64}) {
      TensorList in = e.inputs(t, seed++);
      Tensor out = e.call(in);
      std::string what = e.label + " " + std::string(name(t));
      BOOST_TEST((out.dtype() == e.result_dtype(t)), what << ": result dtype " << name(out.dtype()));
      check_close(out, e.reference(in), e.shape, e.against_reference(t), what);
    }
}

// Each op by sample operands on values computed in the region (its float operands scaled and
// shifted), compiled against eager: the forward, and where it is differentiable the gradients of
// its float operands.
BOOST_AUTO_TEST_CASE(compiled_sample_ops_match_eager) {
  uint64_t seed = 1500;
  for (const SampleOpEntry& e : sample_op_db())
    for (DType t : {DType::f32, DType::f64}) {
      TensorList in = e.inputs(t, seed++);
      auto shifted = [&e](const TensorList& v) {
        TensorList s = v;
        for (Tensor& x : s)
          if (is_floating(x.dtype())) x = x * 0.5 + 0.25;
        return e.call(s);
      };
      std::string what = e.label + " " + std::string(name(t));
      // f64 throughout, or rounded to f32 somewhere (a cast between the two)
      Tolerance tol = compiled_against_eager(t == DType::f64 && e.result_dtype(t) == DType::f64 ? DType::f64 : DType::f32);
      if (e.differentiable) {
        check_compiled_operands_against_eager([&shifted](const TensorList& v) { return sum(shifted(v) * 3.0); }, in,
                                              e.label, what, tol);
        continue;
      }
      auto f = compile(shifted, {.backend = "halide", .name = "op db " + e.label});
      Tensor want = shifted(in);
      check_close(f(in), host_values(want), want.shape(), e.exact ? Tolerance{0, 0} : tol, what);
    }
}
