// Unary, binary, where and cast ops against plain double loops on fresh random inputs:
// several shapes, broadcasting, non-contiguous views, size-1 dims and empty tensors.
#include <cmath>
#include <limits>

#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

double gelu_ref(double x) { return gelu_reference(x, "none"); }
double gelu_tanh_ref(double x) { return gelu_reference(x, "tanh"); }

const std::vector<Shape> kShapes = {{}, {1}, {7}, {3, 5}, {2, 3, 33}, {4, 1, 6}, {0, 3}, {130, 70}};

}  // namespace

BOOST_AUTO_TEST_CASE(unary_ops_match_double_reference) {
  uint64_t seed = 1;
  for (const UnaryOpEntry& c : unary_op_db()) {
    for (DType t : {f32, f64, f16, bf16, i32, i64}) {
      if (is_integral(t) && !c.integers) continue;
      for (const Shape& s : kShapes) {
        Tensor x = random_tensor(s, t, seed++, c.lo, c.hi);
        std::vector<double> in = host_values(x), want;
        for (double v : in) want.push_back(c.reference(v));
        Tensor y = c.call(x);
        BOOST_TEST(y.dtype() == t);
        check_close(y, want, s, c.against_reference(t), c.label + " " + std::string(name(t)) + " " + to_string(s));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(isfinite_marks_inf_and_nan) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {f32, f64, f16, bf16}) {
    Tensor x = from_vector<double>({1.5, inf, -inf, nan, -0.0, 1e30}).to(t);
    Tensor y = isfinite(x);
    BOOST_TEST(y.dtype() == bool_);
    double big_is_finite = t == f16 ? 0 : 1;  // 1e30 overflows f16 to inf
    check_close(y, {1, 0, 0, 0, 1, big_is_finite}, {6}, {0, 0}, std::string("isfinite ") + std::string(name(t)));
  }
  check_close(isfinite(from_vector<int32_t>({-7, 0, 7})), {1, 1, 1}, {3}, {0, 0}, "isfinite i32");
}

BOOST_AUTO_TEST_CASE(unary_float_ops_promote_integers_to_f32) {
  Tensor x = from_vector<int32_t>({1, 2, 3});
  Tensor y = exp(x);
  BOOST_TEST(y.dtype() == f32);
  check_close(y, {std::exp(1.0), std::exp(2.0), std::exp(3.0)}, {3}, "exp(i32)");
}

BOOST_AUTO_TEST_CASE(unary_ops_on_non_contiguous_views) {
  uint64_t seed = 100;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (const Shape& s : std::vector<Shape>{{5, 6}, {3, 4, 17}, {2, 3, 4, 5, 6}}) {
      Tensor x = random_view(s, f32, seed++, kind);
      BOOST_TEST(!x.is_contiguous());
      std::vector<double> want;
      for (double v : host_values(x)) want.push_back(std::tanh(v));
      check_close(tanh(x), want, s, std::string("tanh ") + kind + " " + to_string(s));
    }
  }
}

namespace {

// Reference of a broadcasting binary op in double.
std::vector<double> binary_ref(const Tensor& a, const Tensor& b, const Shape& out,
                               const std::function<double(double, double)>& f) {
  std::vector<double> va = host_values(a), vb = host_values(b), want;
  for_each_index(out, [&](const std::vector<int64_t>& idx) {
    want.push_back(f(va[broadcast_offset(a.shape(), idx)], vb[broadcast_offset(b.shape(), idx)]));
  });
  return want;
}

}  // namespace

BOOST_AUTO_TEST_CASE(binary_ops_broadcast_and_match_reference) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{}, {}},         {{5}, {5}},          {{3, 4}, {4}},       {{3, 1}, {1, 4}},   {{2, 3, 4}, {3, 1}},
      {{4}, {}},        {{}, {6, 2}},        {{0, 4}, {4}},       {{67, 33}, {67, 33}}, {{1, 257}, {9, 1}},
      {{2, 1, 3, 1, 5, 1}, {1, 4, 1, 2, 1, 3}}};
  uint64_t seed = 1000;
  for (const BinaryOpEntry& c : binary_op_db()) {
    bool compare = op_def(c.op).comparison;
    for (DType t : {f32, f64, i32, i64, f16}) {
      if (!c.integers && is_integral(t)) continue;
      for (const auto& [sa, sb] : shapes) {
        Tensor a = random_tensor(sa, t, seed++, c.lhs_lo, c.lhs_hi);
        Tensor b = random_tensor(sb, t, seed++, c.rhs_lo, c.rhs_hi);
        if (compare && numel(sa) > 0 && numel(sb) > 0 && sa == sb) b = a.clone();  // exercise equality
        Shape out = broadcast_shapes("test", sa, sb);
        Tensor y = c.call(a, b);
        BOOST_TEST(y.dtype() == (compare ? bool_ : t));
        check_close(y, binary_ref(a, b, out, c.reference), out, c.against_reference(t),
                    c.op + " " + std::string(name(t)) + " " + to_string(sa) + " " + to_string(sb));
      }
    }
  }
}

// d/dx of gelu_ref and gelu_tanh_ref, in double.
double gelu_grad_ref(double x) { return gelu_grad_reference(x, "none"); }
double gelu_tanh_grad_ref(double x) { return gelu_grad_reference(x, "tanh"); }

// gelu's backward as one op: grad * gelu'(x), against the derivatives in double (which central
// differences of gelu_ref confirm to 1e-9), with broadcasting and both forms.
BOOST_AUTO_TEST_CASE(gelu_backward_matches_the_derivative_in_double) {
  for (double x : {-4.0, -1.3, -0.2, 0.0, 0.7, 2.5}) {
    const double h = 1e-5;
    BOOST_TEST(std::abs((gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h) - gelu_grad_ref(x)) < 1e-9);
    BOOST_TEST(std::abs((gelu_tanh_ref(x + h) - gelu_tanh_ref(x - h)) / (2 * h) - gelu_tanh_grad_ref(x)) < 1e-9);
  }
  uint64_t seed = 1500;
  for (const char* form : {"none", "tanh"}) {
    auto grad_ref = std::string(form) == "tanh" ? gelu_tanh_grad_ref : gelu_grad_ref;
    auto derivative = [&](double g, double x) { return g * grad_ref(x); };
    for (DType t : {f32, f64, bf16}) {
      for (const auto& [sg, sx] : std::vector<std::pair<Shape, Shape>>{{{130, 70}, {130, 70}}, {{3, 1}, {3, 9}}, {{}, {7}}}) {
        Tensor g = random_tensor(sg, t, seed++, -2, 2), x = random_tensor(sx, t, seed++, -5, 5);
        Shape out = broadcast_shapes("test", sg, sx);
        Tensor y = gelu_backward(g, x, form);
        BOOST_TEST(y.dtype() == t);
        Tolerance tol = tolerance(t);
        // 1 + erf(x / sqrt 2) cancels for x far below 0; f32's erf is good to ~1e-6 there (as for
        // gelu itself above), times |grad| <= 2.
        if (t == f32) tol.atol = 2.5e-6;
        check_close(y, binary_ref(g, x, out, derivative), out, tol,
                    std::string("gelu_backward ") + form + " " + std::string(name(t)) + " " + to_string(out));
      }
    }
  }
  Tensor g = random_tensor({4}, i32, seed++), x = random_tensor({4}, i32, seed++);
  BOOST_TEST(gelu_backward(g, x).dtype() == f32);
  BOOST_CHECK_THROW(gelu_backward(random_tensor({2}, f32, 1), random_tensor({2}, f32, 2), "exact"), Error);
}

BOOST_AUTO_TEST_CASE(binary_ops_on_views_and_scalars) {
  uint64_t seed = 2000;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    Tensor a = random_view({6, 9}, f32, seed++, kind);
    Tensor b = random_view({6, 9}, f32, seed++, "transposed");
    check_close(a * b, binary_ref(a, b, {6, 9}, [](double x, double y) { return x * y; }), {6, 9},
                std::string("mul on ") + kind);
  }
  Tensor x = random_tensor({4, 5}, f32, seed++);
  std::vector<double> v = host_values(x), want;
  for (double e : v) want.push_back(2.5 - e * 3.0);
  check_close(2.5 - x * 3.0, want, {4, 5}, "scalar expression");
  want.clear();
  for (double e : v) want.push_back(1.0 / e);
  check_close(1.0 / x, want, {4, 5}, "scalar / tensor");
}

BOOST_AUTO_TEST_CASE(type_promotion_follows_the_category_rule) {
  Tensor fi = from_vector<int32_t>({1, 2}), fl = from_vector<int64_t>({3, 4});
  Tensor ff = from_vector<float>({0.5f, 1.5f}), fd = from_vector<double>({0.25, 0.75});
  BOOST_TEST((fi + fl).dtype() == i64);
  BOOST_TEST((fi + ff).dtype() == f32);
  BOOST_TEST((ff + fd).dtype() == f64);
  BOOST_TEST((fi / fi).dtype() == f32);  // true division
  BOOST_TEST((ff.to(f16) * 2.0).dtype() == f16);  // a scalar does not widen
  BOOST_TEST((fi * 2.5).dtype() == f32);          // a float scalar lifts integers to f32
  BOOST_TEST((fi * 2.0).dtype() == i32);          // an integral scalar keeps the dtype
  BOOST_TEST((ff.to(f16) + ff.to(bf16)).dtype() == f32);
  check_close(fi / from_vector<int32_t>({2, 4}), {0.5, 0.5}, {2}, "int true division");
}

BOOST_AUTO_TEST_CASE(where_selects_with_broadcasting) {
  uint64_t seed = 3000;
  for (DType t : {f32, f64, i32, i64, bool_, bf16}) {
    Tensor c = random_tensor({4, 1, 5}, bool_, seed++);
    Tensor a = random_tensor({3, 5}, t, seed++);
    Tensor b = random_tensor({4, 3, 1}, t, seed++);
    std::vector<double> vc = host_values(c), va = host_values(a), vb = host_values(b), want;
    Shape out{4, 3, 5};
    for_each_index(out, [&](const std::vector<int64_t>& idx) {
      want.push_back(vc[broadcast_offset(c.shape(), idx)] != 0 ? va[broadcast_offset(a.shape(), idx)]
                                                               : vb[broadcast_offset(b.shape(), idx)]);
    });
    Tensor y = where(c, a, b);
    BOOST_TEST(y.dtype() == t);
    check_close(y, want, out, {0, 0}, "where " + std::string(name(t)));
  }
  Tensor x = random_tensor({8}, f32, seed++);
  std::vector<double> want;
  for (double v : host_values(x)) want.push_back(v > 0 ? v : 0.0);
  check_close(where(gt(x, 0.0), x, 0.0), want, {8}, "where with scalar");
  // The chosen operand's bits exactly (where is a bitwise choice): inf, NaN, -0, the smallest
  // denormal, also as f16; and a 0-d condition, as a GradScaler's skip makes it.
  const float inf = INFINITY, nan = NAN, tiny = 1e-45f;
  Tensor special = from_vector<float>({inf, -inf, nan, -0.0f, tiny, 1.5f}, {6});
  Tensor other = from_vector<float>({1, 2, 3, 4, 5, 6}, {6});
  Tensor pick = from_vector<float>({1, 0, 1, 1, 1, 0}, {6}).to(bool_);
  for (DType t : {f32, f16}) {
    std::vector<double> got = host_values(where(pick, special.to(t), other.to(t))),
                        exp = host_values(special.to(t)), alt = host_values(other.to(t));
    std::vector<double> expected{exp[0], alt[1], exp[2], exp[3], exp[4], alt[5]};
    for (size_t i = 0; i < got.size(); ++i) {
      BOOST_TEST_CONTEXT("where bits " << name(t) << " element " << i) {
        BOOST_TEST((std::isnan(got[i]) ? std::isnan(expected[i]) : got[i] == expected[i]));
        BOOST_TEST(std::signbit(got[i]) == std::signbit(expected[i]));
      }
    }
  }
  Tensor flag = full({}, 1.0).to(bool_);
  check_close(where(flag, special, other), host_values(special), {6}, {0, 0}, "where with a 0-d condition");
}

BOOST_AUTO_TEST_CASE(cast_between_all_dtypes) {
  uint64_t seed = 4000;
  const DType all[] = {f32, f64, f16, bf16, i32, i64, bool_};
  for (DType from : all) {
    for (DType to : all) {
      Tensor x = random_tensor({3, 7}, from, seed++, -100, 100);
      std::vector<double> want;
      for (double v : host_values(x)) {
        double w = v;
        if (is_integral(to)) w = std::trunc(v);
        if (to == bool_) w = v != 0;
        if (to == f16) w = half_to_float(float_to_half(float(v)));
        if (to == bf16) w = bfloat16_to_float(float_to_bfloat16(float(v)));
        if (to == f32) w = float(v);
        want.push_back(w);
      }
      Tensor y = x.to(to);
      BOOST_TEST(y.dtype() == to);
      check_close(y, want, {3, 7}, {0, 0}, std::string(name(from)) + " -> " + std::string(name(to)));
    }
  }
}

BOOST_AUTO_TEST_CASE(transcendentals_hold_accuracy_at_the_edges) {
  // Values where kiln's vectorized tanh/sin/cos switch formulas or reduce large arguments.
  std::vector<double> xs = {0.0,  1e-7,  -1e-7, 1e-3,   -1e-3, 0.1249, 0.1251, -0.1251, 0.5,   3.0,
                            -9.0, 20.0,  -20.0, 100.0,  -100.0, 1000.5, -2e4,   M_PI,   -M_PI, 1e-30};
  for (DType t : {f32, f64}) {
    Tensor x = from_vector<double>(xs).to(t);
    std::vector<double> in = host_values(x);
    auto check = [&](const char* name, Tensor y, double (*ref)(double), double rel_err_f32) {
      std::vector<double> want;
      for (double v : in) want.push_back(ref(v));
      Tolerance tol = t == f64 ? Tolerance{1e-13, 1e-13} : Tolerance{rel_err_f32, 2e-6};
      check_close(y, want, {int64_t(xs.size())}, tol, std::string(name) + " " + std::string(kiln::name(t)));
    };
    check("tanh", tanh(x), [](double v) { return std::tanh(v); }, 3e-7);
    check("sin", sin(x), [](double v) { return std::sin(v); }, 3e-7);
    check("cos", cos(x), [](double v) { return std::cos(v); }, 3e-7);
  }
  Tensor special = from_vector<float>({INFINITY, -INFINITY, NAN});
  std::vector<double> th = host_values(tanh(special));
  BOOST_TEST(th[0] == 1.0);
  BOOST_TEST(th[1] == -1.0);
  BOOST_TEST(std::isnan(th[2]));
  for (double v : host_values(sin(special))) BOOST_TEST(std::isnan(v));
}

BOOST_AUTO_TEST_CASE(copies_of_permuted_views_over_tile_edges) {
  // Sizes around the 16x16 tile of the transposed-copy schedule, with size-1 dims in between.
  uint64_t seed = 5000;
  const std::vector<std::vector<int64_t>> perms = {{0, 2, 1}, {2, 1, 0}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}};
  for (int64_t a : {1, 15, 16, 17, 33})
    for (int64_t b : {1, 2, 16, 31})
      for (int64_t c : {1, 3, 16})
        for (const auto& perm : perms) {
          Tensor x = random_tensor({a, b, c}, f32, seed++).permute(perm);
          check_close(x.contiguous(), host_values(x), x.shape(), {0, 0},
                      "contiguous of " + to_string({a, b, c}) + " permuted " + to_string(perm));
        }
}
