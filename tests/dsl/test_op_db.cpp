// The op database (tests/support/op_db.h) covers every op of the kinds it holds, and drives the
// compiled path's test: each unary op compiled (halide backend) against eager, forward and
// backward. The eager, gradcheck and CUDA suites iterate over the same entries.
#include <set>

#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(every_differentiable_unary_op_has_an_entry) {
  std::set<std::string> listed;
  for (const UnaryOpEntry& e : unary_op_db()) {
    listed.insert(e.op);
    BOOST_TEST((e.lo < e.hi && e.grad_lo < e.grad_hi), e.label);
  }
  for (const OpDef* d : all_op_defs()) {
    bool unary = d->pointwise && d->num_inputs == 1 && d->schedule_class == ScheduleClass::pointwise && d->name != "cast";
    if (unary && d->differentiable)
      BOOST_TEST(listed.count(d->name) == 1u, d->name << " has no entry in tests/support/op_db.cpp");
  }
}

BOOST_AUTO_TEST_CASE(compiled_unary_ops_match_eager_forward_and_backward) {
  uint64_t seed = 1;
  for (const UnaryOpEntry& c : unary_op_db()) {
    for (DType t : {DType::f32, DType::f64}) {
      Tensor x = random_tensor({3, 37}, t, seed++, c.grad_lo, c.grad_hi);
      // The op between other work, as a model has it: the region fuses it with its neighbours.
      auto fn = [&c](const Tensor& a) { return sum(c.call(a * 0.5 + 0.25) * 3.0); };
      auto f = compile(fn, {.backend = "halide", .name = "op db " + c.label});
      Tolerance tol = t == DType::f64 ? Tolerance{1e-10, 1e-10} : Tolerance{1e-5, 1e-5};
      std::string what = c.label + " " + std::string(name(t));
      Tensor want = fn(x);
      check_close(f(x), host_values(want), want.shape(), tol, what + " forward");

      Tensor xe = x.detach().requires_grad_(), xc = x.detach().requires_grad_();
      fn(xe).backward();
      f(xc).backward();
      check_close(xc.grad(), host_values(xe.grad()), x.shape(), tol, what + " backward");
    }
  }
}
