// A Halide op of the tests (graph/halide_op.h), registered once a process, with its math in
// double for the references: "kiln_test::swish", x [...], beta (broadcast) ->
// x * sigmoid(beta * x), or the attribute clip where x is above it (a branch for the derivative).
// Its gradients come from propagate_adjoints (no derivative rule is registered).
#pragma once
#include "dsl/op_def.h"

namespace kiln::test {

const OpDef& swish();

double swish_reference(double x, double beta);
double swish_dx_reference(double x, double beta);
double swish_dbeta_reference(double x, double beta);

}  // namespace kiln::test
