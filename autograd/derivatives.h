// The derivative rules: one per differentiable op, written with Tensor ops, in one table
// (derivatives.cpp; a unary op's rule is written on its line of dsl/ops/unary_ops.h). The table
// is built once, on first use, checked against the op registry (every differentiable op has a
// rule, every rule names a differentiable op), and never changed afterwards. The same rules run
// on the eager tape and get traced into the backward graphs of compiled training steps. Ties:
// maximum/minimum split the gradient evenly between equal inputs.
#pragma once
#include <functional>

#include "dsl/custom_op.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

// DerivativeRule (dsl/custom_op.h): grads of the outputs -> grads of the inputs.

// The rule of a differentiable op (a custom op's own, CustomOp::backward); kiln::Error naming the
// op for one without a rule.
const DerivativeRule& derivative_rule(const OpDef& def);
// False for ops whose outputs carry no gradient (comparisons, argmax, integer results).
bool is_differentiable(const OpDef& def);
// The names of all ops with a derivative rule.
std::vector<std::string> ops_with_derivatives();

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace kiln
