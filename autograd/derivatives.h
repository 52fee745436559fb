// The derivative rules: one per differentiable op, written with Tensor ops, in one table
// (derivatives.cpp). The same rules run on the eager tape and (later) get traced into backward
// graphs. Ties: maximum/minimum split the gradient evenly between equal inputs.
#pragma once
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

// Fills OpDef::derivative of every op in the table.
void install_derivatives();
// False for ops whose outputs carry no gradient (comparisons, argmax, integer results).
bool is_differentiable(const OpDef& def);
// The names of all ops with a derivative rule.
std::vector<std::string> ops_with_derivatives();

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace kiln
