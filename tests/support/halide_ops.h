// A Halide op of the tests (graph/halide_op.h), registered once a process, with its math in
// double for the references: "kiln_test::swish", x [...], beta (broadcast) ->
// x * sigmoid(beta * x), or the attribute clip where x is above it (a branch for the derivative).
// Its gradients come from propagate_adjoints (no derivative rule is registered).
// Two ops over whole tensors (HalideOp::define), their gradients from propagate_adjoints too:
// "kiln_test::blur_rows", x [..., C] -> the mean of each element and its two neighbours along the
// last dim (the edges repeat); "kiln_test::weighted_sumsq", x [R, C], w [C] -> [R], the sum over
// a row of x^2 w (a reduction over an RDom).
#pragma once
#include <vector>

#include "dsl/op_def.h"

namespace kiln::test {

const OpDef& swish();

double swish_reference(double x, double beta);
double swish_dx_reference(double x, double beta);
double swish_dbeta_reference(double x, double beta);

const OpDef& blur_rows();
const OpDef& weighted_sumsq();
// In double, row-major: x of rows of `c`.
std::vector<double> blur_rows_reference(const std::vector<double>& x, int64_t c);
std::vector<double> weighted_sumsq_reference(const std::vector<double>& x, const std::vector<double>& w);

}  // namespace kiln::test
