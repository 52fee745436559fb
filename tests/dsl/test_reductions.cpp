// Reductions (sum, mean, max, min, argmax, var, logsumexp) against plain double loops on fresh
// random inputs: dim lists (single, several non-adjacent, negative, all), keepdim both ways, every
// dtype, non-contiguous views, sizes that reach the vectorized and parallel kernel paths, 0-d and
// empty tensors, ties of argmax, and every error path.
#include <cmath>
#include <limits>

#include "dsl/dispatch.h"
#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;

double argmax_of(const Values& v) { return double(std::max_element(v.begin(), v.end()) - v.begin()); }
using Op = ReductionOpEntry;

int64_t reduced_count(const Shape& s, const std::vector<int64_t>& dims) {
  if (dims.empty() || s.empty()) return numel(s);
  int64_t n = 1;
  for (int64_t d : dims) n *= s[d < 0 ? d + int64_t(s.size()) : d];
  return n;
}

void check_op(const Op& op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType want_dtype,
              const std::string& what) {
  Shape shape;
  Values want = reduction_reference(x, dims, op.reference, &shape, keepdim);
  Tensor y = op.call(x, dims, keepdim);
  BOOST_TEST(y.dtype() == want_dtype, what << ": dtype " << y.dtype());
  check_close(y, want, shape, op.against_reference(want_dtype, reduced_count(x.shape(), dims)), what);
}

const std::vector<std::pair<Shape, std::vector<std::vector<int64_t>>>> kCases = {
    {{}, {{}, {0}, {-1}}},
    {{1}, {{}, {0}}},
    {{7}, {{}, {0}, {-1}}},
    {{3, 5}, {{}, {0}, {1}, {-1, 0}}},
    {{4, 1, 6}, {{}, {1}, {0, 2}, {2}}},
    {{2, 3, 4, 5}, {{}, {1, 3}, {0, 2}, {-1}, {0, 1, 2}, {3, 0}}},
    {{33, 70}, {{}, {0}, {1}}},
    {{1000}, {{0}}},
};

}  // namespace

BOOST_AUTO_TEST_CASE(float_reductions_match_double_reference) {
  uint64_t seed = 1;
  for (const Op& op : reduction_op_db()) {
    for (DType t : {f32, f64}) {
      for (const auto& [shape, dim_lists] : kCases) {
        for (const auto& dims : dim_lists) {
          for (bool keepdim : {false, true}) {
            Tensor x = random_tensor(shape, t, seed++);
            check_op(op, x, dims, keepdim, t,
                     op.label + " " + std::string(name(t)) + " " + to_string(shape) + " dims " + to_string(dims) +
                         (keepdim ? " keepdim" : ""));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(half_precision_reductions_compute_in_f32) {
  uint64_t seed = 500;
  for (const Op& op : reduction_op_db()) {
    for (DType t : {f16, bf16}) {
      for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1}, {0}, {}}) {
        Tensor x = random_tensor({6, 40}, t, seed++);
        Shape shape;
        Values want = reduction_reference(x, dims, op.reference, &shape, false);
        Tensor y = op.call(x, dims, false);
        BOOST_TEST(y.dtype() == t);
        // The result is rounded once to t; the input values are exact in the reference.
        Tolerance tol = tolerance(t);
        tol.atol *= 4;
        check_close(y, want, shape, tol, op.label + " " + std::string(name(t)) + " dims " + to_string(dims));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(integer_and_bool_reductions) {
  uint64_t seed = 800;
  const Op &sum_op = reduction_entry("sum"), &max_op = reduction_entry("max"), &min_op = reduction_entry("min");
  for (DType t : {i32, i64, bool_}) {
    for (const auto& [shape, dim_lists] : kCases) {
      for (const auto& dims : dim_lists) {
        Tensor x = random_tensor(shape, t, seed++, -50, 50);
        std::string what = std::string(name(t)) + " " + to_string(shape) + " dims " + to_string(dims);
        check_op(sum_op, x, dims, false, i64, "sum " + what);
        check_op(max_op, x, dims, true, t, "max " + what);
        check_op(min_op, x, dims, false, t, "min " + what);
      }
    }
  }
  // Float ops on integers compute in f32.
  Tensor xi = random_tensor({5, 9}, i32, seed++, -20, 20);
  check_op(reduction_entry("mean"), xi, {1}, false, f32, "mean i32");
  check_op(reduction_entry("var"), xi, {0}, false, f32, "var i32");
  check_op(reduction_entry("logsumexp"), xi, {}, false, f32, "logsumexp i32");
  // i64 sums are exact past 2^53.
  Tensor big = from_vector<int64_t>({int64_t(1) << 60, 3, -(int64_t(1) << 58), 1});
  BOOST_TEST(sum(big).item<int64_t>() == (int64_t(1) << 60) - (int64_t(1) << 58) + 4);
  BOOST_TEST(sum(from_vector<int32_t>({2000000000, 2000000000})).item<int64_t>() == 4000000000);
}

BOOST_AUTO_TEST_CASE(reductions_of_non_contiguous_views) {
  uint64_t seed = 1200;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (const Shape& shape : std::vector<Shape>{{6, 9}, {3, 4, 17}, {2, 3, 4, 5}}) {
      for (const std::vector<int64_t>& dims :
           std::vector<std::vector<int64_t>>{{}, {0}, {-1}, {-2}, {0, int64_t(shape.size()) - 1}}) {
        for (DType t : {f32, i64}) {
          Tensor x = random_view(shape, t, seed++, kind);
          std::string what = std::string(kind) + " " + std::string(name(t)) + " " + to_string(shape) + " dims " +
                             to_string(dims);
          check_op(reduction_entry("sum"), x, dims, false, t == f32 ? f32 : i64, "sum " + what);
          check_op(reduction_entry("max"), x, dims, true, t, "max " + what);
          if (t == f32) check_op(reduction_entry("var"), x, dims, false, f32, "var " + what);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(large_reductions_take_the_vectorized_and_parallel_paths) {
  uint64_t seed = 1500;
  // (rows, length) layouts: long rows (inner), long columns (outer), one huge row (full), and a
  // full reduction of a transposed tensor (its reduced dims collapse into one dense dim).
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{300, 517}, {1}}, {{300, 517}, {0}}, {{3, 150001}, {1}}, {{2, 70000}, {}},
      {{150001, 2}, {0}}, {{4096, 33}, {0}}, {{64, 2049}, {-1}}};
  for (const auto& [shape, dims] : cases) {
    for (DType t : {f32, f64}) {
      for (const Op& op : reduction_op_db()) {
        if (op.label == "var0" || (op.label == "min" && t == f64)) continue;
        Tensor x = random_tensor(shape, t, seed++);
        check_op(op, x, dims, false, t, op.label + " " + std::string(name(t)) + " " + to_string(shape) + " dims " +
                                            to_string(dims));
      }
    }
    Tensor xi = random_tensor(shape, i64, seed++, -1000, 1000);
    check_op(reduction_entry("sum"), xi, dims, false, i64, "sum i64 " + to_string(shape));
    Tensor xt = random_tensor({shape[1], shape[0]}, f32, seed++).t();
    check_op(reduction_entry("sum"), xt, dims, false, f32, "sum transposed " + to_string(shape));
  }
}

BOOST_AUTO_TEST_CASE(sums_accumulate_accurately) {
  // 2^25 ones: a single serial f32 accumulator would stall at 2^24.
  Tensor x = full({1 << 25}, 1.0);
  BOOST_TEST(sum(x).item<float>() == float(1 << 25));
  Tensor y = random_tensor({1 << 20}, f32, 1700, 0, 1);
  double want = sum_of(host_values(y));
  BOOST_TEST(std::abs(sum(y).item<float>() - want) <= 1e-5 * want);
  BOOST_TEST(std::abs(mean(y).item<float>() - want / (1 << 20)) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(argmax_returns_the_first_maximum) {
  uint64_t seed = 1800;
  Op op{"argmax", "argmax", nullptr, argmax_of, false};
  for (DType t : {f32, f64, i32, i64, bool_, f16}) {
    for (const Shape& shape : std::vector<Shape>{{}, {1}, {9}, {5, 8}, {3, 4, 5}, {40, 1000}, {1000, 40}}) {
      for (int64_t dim = -int64_t(std::max<size_t>(shape.size(), 1)); dim < int64_t(std::max<size_t>(shape.size(), 1)); ++dim) {
        for (bool keepdim : {false, true}) {
          // Few distinct values, so every row has ties.
          Tensor x = random_tensor(shape, t, seed++, 0, 4);
          if (is_floating(t)) x = random_tensor(shape, i32, seed++, 0, 4).to(t);
          op.call = [dim](const Tensor& v, const std::vector<int64_t>&, bool k) { return argmax(v, dim, k); };
          check_op(op, x, shape.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{dim}, keepdim, i64,
                   "argmax " + std::string(name(t)) + " " + to_string(shape) + " dim " + std::to_string(dim));
        }
      }
    }
  }
  Tensor x = from_vector<float>({1, 7, 3, 7, 7, 2}, {2, 3});
  BOOST_TEST(argmax(x, 1).to_vector<int64_t>() == (std::vector<int64_t>{1, 0}));
  BOOST_TEST(argmax(x, 0).to_vector<int64_t>() == (std::vector<int64_t>{1, 0, 0}));
  BOOST_TEST(to_string(argmax(x, 0, true).shape()) == "[1, 3]");
  BOOST_TEST(x.argmax(-1).to_vector<int64_t>() == (std::vector<int64_t>{1, 0}));
}

BOOST_AUTO_TEST_CASE(zero_d_and_size_one_reductions) {
  Tensor s = from_vector<float>({2.5f}, {});
  BOOST_TEST(sum(s).item<float>() == 2.5f);
  BOOST_TEST(sum(s, {0}).dim() == 0);
  BOOST_TEST(sum(s, {-1}, true).dim() == 0);
  BOOST_TEST(max(s).item<float>() == 2.5f);
  BOOST_TEST(mean(s).item<float>() == 2.5f);
  BOOST_TEST(std::isnan(var(s).item<float>()));  // one value, correction 1: 0 / 0
  BOOST_TEST(var(s, {}, 0).item<float>() == 0.0f);
  BOOST_TEST(argmax(s, 0).item<int64_t>() == 0);
  BOOST_TEST(std::abs(logsumexp(s, {}).item<float>() - 2.5f) < 1e-6);
  Tensor one = from_vector<int32_t>({7}, {1, 1, 1});
  BOOST_TEST(sum(one, {1}).item<int64_t>() == 7);
  BOOST_TEST(to_string(sum(one, {0, 2}, true).shape()) == "[1, 1, 1]");
}

BOOST_AUTO_TEST_CASE(empty_reductions_follow_pytorch) {
  Tensor e = random_tensor({0, 3}, f32, 1900);
  check_close(sum(e, {0}), {0, 0, 0}, {3}, "sum over an empty dim");
  BOOST_TEST(sum(e).item<float>() == 0.0f);
  BOOST_TEST(to_string(sum(e, {1}).shape()) == "[0]");
  BOOST_TEST(sum(random_tensor({0}, i32, 1901)).item<int64_t>() == 0);
  BOOST_TEST(std::isnan(mean(e).item<float>()));
  for (double v : host_values(mean(e, {0}, true))) BOOST_TEST(std::isnan(v));
  BOOST_TEST(std::isnan(var(e).item<float>()));
  BOOST_TEST(logsumexp(e, {0}).to_vector<float>()[0] == -std::numeric_limits<float>::infinity());
  BOOST_TEST(to_string(max(e, {1}).shape()) == "[0]");  // nothing reduced over an empty dim
  BOOST_TEST(to_string(argmax(e, 1, true).shape()) == "[0, 1]");
  check_error([&] { max(e); }, {"max", "zero elements", "[0, 3]"});
  check_error([&] { min(e, {0}); }, {"min", "no identity"});
  check_error([&] { argmax(e, 0); }, {"argmax", "zero elements"});
}

BOOST_AUTO_TEST_CASE(logsumexp_is_stable) {
  Tensor x = from_vector<float>({1000, 1000, -1000, 999}, {2, 2});
  check_close(logsumexp(x, {1}), {1000 + std::log(2.0), 999}, {2}, "large values");
  float inf = std::numeric_limits<float>::infinity();
  Tensor y = from_vector<float>({-inf, -inf, 1, inf}, {2, 2});
  std::vector<float> got = logsumexp(y, {1}).to_vector<float>();
  BOOST_TEST(got[0] == -inf);
  BOOST_TEST(got[1] == inf);
  Tensor z = from_vector<double>({-800, -801}, {2});
  check_close(logsumexp(z, {0}), {-800 + std::log1p(std::exp(-1.0))}, {}, "tiny values");
}

BOOST_AUTO_TEST_CASE(member_functions_call_the_ops) {
  Tensor x = random_tensor({4, 6}, f32, 2000);
  Shape shape;
  check_close(x.sum(), reduction_reference(x, {}, sum_of, &shape, false), shape, "x.sum()");
  check_close(x.mean({1}, true), reduction_reference(x, {1}, mean_of, &shape, true), shape, "x.mean");
  check_close(x.max({0}), reduction_reference(x, {0}, max_of, &shape, false), shape, "x.max");
  check_close(x.min({-1}), reduction_reference(x, {-1}, min_of, &shape, false), shape, "x.min");
  check_close(x.var({0}, 0), reduction_reference(x, {0}, var_of(0), &shape, false), shape, "x.var");
  check_close(x.logsumexp({1}), reduction_reference(x, {1}, logsumexp_of, &shape, false), shape, "x.logsumexp");
  check_close(x.var({}, 2, true), reduction_reference(x, {}, var_of(2), &shape, true), shape, "x.var correction 2");
}

BOOST_AUTO_TEST_CASE(reduction_errors_name_the_op_and_the_rule) {
  Tensor x = random_tensor({2, 3, 4}, f32, 2100);
  check_error([&] { sum(x, {3}); }, {"sum", "dim 3 out of range", "rank 3"});
  check_error([&] { mean(x, {-4}); }, {"mean", "dim -4 out of range"});
  check_error([&] { max(x, {0, 2, -3}); }, {"max", "more than once"});
  check_error([&] { var(x, {1, 1}); }, {"var", "more than once"});
  check_error([&] { argmax(x, 5); }, {"argmax", "out of range"});
  check_error([&] { logsumexp(x, {2, 7}); }, {"logsumexp", "out of range"});
  check_error([&] { dispatch(op_def("argmax"), {x}, {{"dims", std::vector<int64_t>{0, 1}}}); },
              {"argmax", "exactly one dim"});
}
