#include "support/halide_ops.h"

#include <algorithm>
#include <cmath>

#include "dsl/error.h"
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

const OpDef& blur_rows() {
  static const OpDef& op = register_halide_op(
      {.name = "kiln_test::blur_rows",
       .define = [](const std::vector<HalideTensor>& in, const Attrs&) {
         const HalideTensor& x = in[0];
         std::vector<Halide::Var> v = halide_vars(x.rank());
         std::vector<Halide::Expr> left(v.begin(), v.end()), right(v.begin(), v.end());
         left[0] = v[0] - 1;
         right[0] = v[0] + 1;
         Halide::Func f("blur");
         f(v) = (x.func(left) + x.func(v) + x.func(right)) / 3.0f;
         return std::vector<HalideTensor>{{f, x.shape, x.dtype}};
       },
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
         KILN_CHECK(!in[0].shape.empty(), "kiln_test::blur_rows: x must have a dim to blur along");
         return std::vector<TensorMeta>{in[0]};
       }});
  return op;
}

const OpDef& weighted_sumsq() {
  static const OpDef& op = register_halide_op(
      {.name = "kiln_test::weighted_sumsq",
       .num_inputs = 2,
       .define = [](const std::vector<HalideTensor>& in, const Attrs&) {
         const HalideTensor &x = in[0], &w = in[1];
         Halide::Var i("i");
         Halide::RDom r(0, x.dim(1), "r");
         Halide::Func f("sumsq");
         f(i) = Halide::Internal::make_zero(x.func.output_types()[0]);
         f(i) += x.func(r, i) * x.func(r, i) * w.func(r);
         return std::vector<HalideTensor>{{f, {x.dim(0)}, x.dtype}};
       },
       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) {
         KILN_CHECK(in[0].shape.size() == 2 && in[1].shape.size() == 1 && in[1].shape[0] == in[0].shape[1],
                    "kiln_test::weighted_sumsq: x [R, C] and w [C], got ", to_string(in[0]), " and ", to_string(in[1]));
         return std::vector<TensorMeta>{{{in[0].shape[0]}, in[0].dtype, in[0].device}};
       }});
  return op;
}

std::vector<double> blur_rows_reference(const std::vector<double>& x, int64_t c) {
  std::vector<double> out(x.size());
  for (size_t row = 0; row < x.size(); row += size_t(c))
    for (int64_t j = 0; j < c; ++j) {
      double l = x[row + size_t(std::max<int64_t>(j - 1, 0))], r = x[row + size_t(std::min<int64_t>(j + 1, c - 1))];
      out[row + size_t(j)] = (l + x[row + size_t(j)] + r) / 3;
    }
  return out;
}

std::vector<double> weighted_sumsq_reference(const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> out(x.size() / w.size(), 0.0);
  for (size_t i = 0; i < x.size(); ++i) out[i / w.size()] += x[i] * x[i] * w[i % w.size()];
  return out;
}

}  // namespace kiln::test
