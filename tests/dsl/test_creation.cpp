// Creating tensors: filled tensors, ranges, random draws (ranges, moments, seeding), host data
// in and out (from_vector, item, to_vector), and dtype conversions with to(dtype).
#include <algorithm>
#include <cmath>
#include <set>

#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::vector<DType> kAllDTypes = {f32, f64, f16, bf16, i32, i64, bool_};
const std::vector<DType> kFloatDTypes = {f32, f64, f16, bf16};

struct Moments {
  double mean, var;
};

Moments moments(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / double(v.size() - 1)};
}

std::string dt(DType t) { return std::string(name(t)); }

}  // namespace

// Every creation op of the database (tests/support/op_db.h) in each of its dtypes.
BOOST_AUTO_TEST_CASE(creation_ops_match_their_values) {
  for (const CreationOpEntry& e : creation_op_db())
    for (DType t : e.dtypes) {
      Tensor x = e.call({.dtype = t});
      BOOST_TEST(x.dtype() == t, e.label);
      BOOST_TEST(x.is_contiguous(), e.label);
      check_close(x, e.reference(), e.shape, e.label + " " + dt(t));
    }
}

BOOST_AUTO_TEST_CASE(zeros_ones_full_every_dtype) {
  for (DType t : kAllDTypes) {
    for (const Shape& s : std::vector<Shape>{{}, {0}, {3}, {2, 3, 4}}) {
      std::string what = dt(t) + " " + to_string(s);
      size_t n = size_t(numel(s));
      check_close(zeros(s, {.dtype = t}), std::vector<double>(n, 0), s, "zeros " + what);
      check_close(ones(s, {.dtype = t}), std::vector<double>(n, 1), s, "ones " + what);
      double v = t == bool_ ? 1 : is_integral(t) ? -7 : -2.5;
      check_close(full(s, v, {.dtype = t}), std::vector<double>(n, v), s, "full " + what);
      BOOST_TEST(empty(s, {.dtype = t}).dtype() == t);
      BOOST_TEST(zeros(s, {.dtype = t}).is_contiguous());
    }
  }
  check_close(full({4}, 0.1, {.dtype = f16}), std::vector<double>(4, 0.1), {4}, "full f16 rounds");
  check_close(full({2}, 5, {.dtype = bool_}), {1, 1}, {2}, "full bool of nonzero");
  BOOST_TEST(zeros({2, 2}).dtype() == f32);
}

BOOST_AUTO_TEST_CASE(arange_int_and_float_with_negative_steps) {
  check_close(arange(5), {0, 1, 2, 3, 4}, {5}, "arange(5)");
  BOOST_TEST(arange(5).dtype() == f32);
  check_close(arange(5, {.dtype = i64}), {0, 1, 2, 3, 4}, {5}, "arange(5) i64");
  check_close(arange(2, 11, 3, {.dtype = i32}), {2, 5, 8}, {3}, "arange step 3 i32");
  check_close(arange(10, 0, -3, {.dtype = i64}), {10, 7, 4, 1}, {4}, "arange negative step i64");
  check_close(arange(1, 0, -0.25, {.dtype = f64}), {1, 0.75, 0.5, 0.25}, {4}, "arange negative step f64");
  check_close(arange(-3, 3, 1, {.dtype = i32}), {-3, -2, -1, 0, 1, 2}, {6}, "arange negative start");
  Tensor f = arange(0, 1, 0.1);
  std::vector<double> want;
  for (int i = 0; i < 10; ++i) want.push_back(0.1 * i);
  check_close(f, want, {10}, "arange float step");
  check_close(arange(0, 3, 0.5, {.dtype = bf16}), {0, 0.5, 1, 1.5, 2, 2.5}, {6}, "arange bf16");
  check_close(arange(0, 3, 0.5, {.dtype = f16}), {0, 0.5, 1, 1.5, 2, 2.5}, {6}, "arange f16");
  check_close(arange(3, 3), {}, {0}, "empty arange");
  check_close(arange(0, 10, 4, {.dtype = i64}), {0, 4, 8}, {3}, "arange with a partial last step");
}

BOOST_AUTO_TEST_CASE(linspace_every_float_dtype) {
  for (DType t : kFloatDTypes) {
    check_close(linspace(0, 1, 5, {.dtype = t}), {0, 0.25, 0.5, 0.75, 1}, {5}, "linspace " + dt(t));
    check_close(linspace(3, -3, 7, {.dtype = t}), {3, 2, 1, 0, -1, -2, -3}, {7}, "decreasing " + dt(t));
    check_close(linspace(-1, 1, 1, {.dtype = t}), {-1}, {1}, "one step " + dt(t));
    check_close(linspace(2, 3, 0, {.dtype = t}), {}, {0}, "no steps " + dt(t));
  }
  check_close(linspace(0, 10, 6, {.dtype = i64}), {0, 2, 4, 6, 8, 10}, {6}, "linspace i64");
  Tensor l = linspace(-1.5, 2.25, 101, {.dtype = f64});
  std::vector<double> v = host_values(l);
  BOOST_TEST(v.front() == -1.5);
  BOOST_TEST(v.back() == 2.25);  // the end is exact
  for (size_t i = 1; i < v.size(); ++i) BOOST_TEST(std::abs(v[i] - v[i - 1] - 0.0375) < 1e-12);
}

BOOST_AUTO_TEST_CASE(rand_is_uniform_in_unit_interval) {
  manual_seed(123);
  for (DType t : kFloatDTypes) {
    Tensor r = rand({100000}, {.dtype = t});
    BOOST_TEST(r.dtype() == t);
    std::vector<double> v = host_values(r);
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    BOOST_TEST(lo >= 0, dt(t) << " min " << lo);
    BOOST_TEST(hi < 1, dt(t) << " max " << hi);
    Moments m = moments(v);
    BOOST_TEST(std::abs(m.mean - 0.5) < 0.01, dt(t) << " mean " << m.mean);
    BOOST_TEST(std::abs(m.var - 1.0 / 12) < 0.004, dt(t) << " var " << m.var);
  }
  BOOST_TEST(rand({2, 3}).shape() == Shape({2, 3}));
  BOOST_TEST(rand({}).numel() == 1);
  BOOST_TEST(rand({0, 3}).numel() == 0);
}

BOOST_AUTO_TEST_CASE(randn_is_standard_normal) {
  manual_seed(321);
  for (DType t : kFloatDTypes) {
    std::vector<double> v = host_values(randn({100000}, {.dtype = t}));
    Moments m = moments(v);
    BOOST_TEST(std::abs(m.mean) < 0.02, dt(t) << " mean " << m.mean);
    BOOST_TEST(std::abs(std::sqrt(m.var) - 1) < 0.02, dt(t) << " std " << std::sqrt(m.var));
    size_t within_1 = 0;
    for (double x : v) within_1 += std::abs(x) < 1;
    BOOST_TEST(std::abs(double(within_1) / double(v.size()) - 0.6827) < 0.01, dt(t));
    for (double x : v) BOOST_TEST_REQUIRE(std::isfinite(x));
  }
}

BOOST_AUTO_TEST_CASE(randint_covers_its_range) {
  manual_seed(5);
  Tensor r = randint(-3, 4, {20000});
  BOOST_TEST(r.dtype() == i64);
  std::vector<double> v = host_values(r);
  std::set<double> seen(v.begin(), v.end());
  BOOST_TEST(seen == std::set<double>({-3, -2, -1, 0, 1, 2, 3}));
  BOOST_TEST(std::abs(moments(v).mean) < 0.1);
  Tensor r32 = randint(0, 2, {1000}, {.dtype = i32});
  BOOST_TEST(r32.dtype() == i32);
  std::vector<double> v32 = host_values(r32);
  BOOST_TEST(std::set<double>(v32.begin(), v32.end()) == std::set<double>({0, 1}));
  Tensor big = randint(0, int64_t(1) << 40, {1000});
  double hi = 0;
  for (double x : host_values(big)) hi = std::max(hi, x);
  BOOST_TEST(hi > double(int64_t(1) << 39));  // wide ranges use the high bits too
}

BOOST_AUTO_TEST_CASE(manual_seed_makes_draws_reproducible) {
  auto draw = [] {
    std::vector<double> v = host_values(rand({50}));
    for (double x : host_values(randn({3, 7}, {.dtype = f64}))) v.push_back(x);
    for (double x : host_values(randint(0, 1000, {40}))) v.push_back(x);
    return v;
  };
  manual_seed(42);
  std::vector<double> a = draw();
  manual_seed(42);
  std::vector<double> b = draw();
  BOOST_TEST(a == b);
  manual_seed(43);
  std::vector<double> c = draw();
  BOOST_TEST(a != c);
  manual_seed(42);
  std::vector<double> first = host_values(rand({50})), second = host_values(rand({50}));
  BOOST_TEST(first != second);  // the generator advances between draws
  BOOST_TEST(first == std::vector<double>(a.begin(), a.begin() + 50));
}

BOOST_AUTO_TEST_CASE(from_vector_every_dtype) {
  check_close(from_vector<float>({1.5f, -2, 3, 4}, {2, 2}), {1.5, -2, 3, 4}, {2, 2}, "f32");
  check_close(from_vector<double>({0.1, 0.2, 0.3}), {0.1, 0.2, 0.3}, {3}, "f64");
  check_close(from_vector<int32_t>({-5, 6}, {2, 1}), {-5, 6}, {2, 1}, "i32");
  int64_t big = (int64_t(1) << 60) + 1;
  Tensor i = from_vector<int64_t>({big, -big});
  BOOST_TEST(i.to_vector<int64_t>() == std::vector<int64_t>({big, -big}));
  check_close(from_vector<bool>({true, false, true}), {1, 0, 1}, {3}, "bool");
  check_close(from_vector<Half>({Half{float_to_half(1.25f)}, Half{float_to_half(-3)}}), {1.25, -3}, {2}, "f16");
  check_close(from_vector<BFloat16>({BFloat16{float_to_bfloat16(0.5f)}}, {}), {0.5}, {}, "bf16 0-d");
  check_close(from_vector<float>({}), {}, {0}, "empty");
  check_close(from_vector<float>({}, {2, 0}), {}, {2, 0}, "empty 2-d");
}

BOOST_AUTO_TEST_CASE(item_and_to_vector_convert) {
  Tensor f = from_vector<float>({1.5f, -2.75f, 0});
  BOOST_TEST(f.to_vector<double>() == std::vector<double>({1.5, -2.75, 0}));
  BOOST_TEST(f.to_vector<int64_t>() == std::vector<int64_t>({1, -2, 0}));  // truncates toward zero
  BOOST_TEST(f.to_vector<int32_t>() == std::vector<int32_t>({1, -2, 0}));
  BOOST_TEST(f.to_vector<bool>() == std::vector<bool>({true, true, false}));
  std::vector<Half> h = f.to_vector<Half>();
  BOOST_TEST(half_to_float(h[1].bits) == -2.75f);
  std::vector<BFloat16> b = f.to_vector<BFloat16>();
  BOOST_TEST(bfloat16_to_float(b[0].bits) == 1.5f);
  BOOST_TEST(f.slice(0, 1, 2).item<float>() == -2.75f);
  BOOST_TEST(full({1, 1}, 7, {.dtype = i64}).item<double>() == 7);
  BOOST_TEST(full({}, 3.5, {.dtype = f64}).item<int32_t>() == 3);
  BOOST_TEST(ones({}, {.dtype = bool_}).item<bool>() == true);
  BOOST_TEST(zeros({1}, {.dtype = bf16}).item<float>() == 0.0f);
  Tensor t = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).t();  // values read in logical order
  BOOST_TEST(t.to_vector<int32_t>() == std::vector<int32_t>({1, 4, 2, 5, 3, 6}));
  BOOST_TEST(from_vector<float>({}).to_vector<float>().empty());
}

BOOST_AUTO_TEST_CASE(to_dtype_round_trips) {
  // Small integers are exact in every dtype: any conversion there and back keeps them.
  Tensor ints = from_vector<double>({0, 1, -1, 7, -8, 100, 0, 1});
  Tensor bits = from_vector<double>({0, 1, 1, 0, 1, 0, 0, 1});
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      const Tensor& src = (a == bool_ || b == bool_) ? bits : ints;
      Tensor x = src.to(a);
      Tensor y = x.to(b);
      BOOST_TEST(y.dtype() == b);
      check_close(y.to(a), host_values(src), {8}, dt(a) + " -> " + dt(b) + " -> " + dt(a));
    }
  }
  Tensor f = random_tensor({5, 7}, f32, 1);
  BOOST_TEST(f.to(f64).to(f32).to_vector<float>() == f.to_vector<float>());
  BOOST_TEST(f.to(f32).shares_storage_with(f));  // same dtype: no copy
  std::vector<double> fv = host_values(f), half_want, trunc_want, nonzero_want;
  for (double v : fv) {
    half_want.push_back(half_to_float(float_to_half(float(v))));
    trunc_want.push_back(std::trunc(v));
    nonzero_want.push_back(v != 0);
  }
  check_close(f.to(f16), half_want, {5, 7}, "f32 -> f16 rounds to nearest");
  check_close(f.to(i32), trunc_want, {5, 7}, "f32 -> i32 truncates");
  check_close(f.to(bool_), nonzero_want, {5, 7}, "f32 -> bool is nonzero");
  check_close(f.t().to(f64), host_values(f.t()), {7, 5}, "to(dtype) of a view");
}
