#include "support/halide_ops.h"

#include <cmath>

#include "dsl/halide_def.h"
#include "graph/halide_op.h"

namespace kiln::test {

const OpDef& swish() {
  static const OpDef& op = register_halide_op(
      {.name = "kiln_test::swish",
       .num_inputs = 2,
       .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs& a) {
         Halide::Expr x = v[0], beta = v[1];
         Halide::Expr s = x / (1.0f + Halide::exp(-beta * x));
         Halide::Expr clip = Halide::cast(x.type(), Halide::Expr(float(a.get_or<double>("clip", 1e30))));
         return Halide::select(x > clip, clip, s);
       }});
  return op;
}

double swish_reference(double x, double beta) { return x / (1 + std::exp(-beta * x)); }

double swish_dx_reference(double x, double beta) {
  double s = 1 / (1 + std::exp(-beta * x));
  return s + x * beta * s * (1 - s);
}

double swish_dbeta_reference(double x, double beta) {
  double s = 1 / (1 + std::exp(-beta * x));
  return x * x * s * (1 - s);
}

}  // namespace kiln::test
