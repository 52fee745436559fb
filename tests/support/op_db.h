// The op database: for each op, how to call it, an independent reference in double, the input
// domain where it is defined and smooth, and the dtypes it takes, so that every test suite (eager
// against the reference, gradcheck, CUDA against the CPU, compiled against eager) iterates over
// the same entries. tests/dsl/test_op_db.cpp fails when a registered op of a covered kind has no
// entry. Covered so far: the differentiable unary pointwise ops (dsl/ops/unary_ops.h and gelu).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::test {

struct UnaryOpEntry {
  std::string op;     // the registered op
  std::string label;  // the op and its variant ("gelu_tanh")
  std::function<Tensor(const Tensor&)> call;
  std::function<double(double)> reference;
  double lo, hi;            // inputs drawn from [lo, hi]: the op's domain
  double grad_lo, grad_hi;  // where it is smooth (gradcheck's finite differences)
  bool integers = false;    // also defined on i32 and i64 (results stay integers)
  double f32_atol = 0;      // a looser absolute tolerance in f32 than tolerance(f32), where needed
};

const std::vector<UnaryOpEntry>& unary_op_db();

}  // namespace kiln::test
