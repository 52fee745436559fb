// softmax, log_softmax, layer_norm and cross_entropy against plain double loops on fresh random
// inputs: the op database's row entries (sizes that reach the vectorized and parallel paths,
// transposed views), then what is particular to each op: every dim, other views, f16, bf16 and
// integer inputs, stability on large logits, empty and 0-d tensors, and every error path.
#include <cmath>
#include <limits>

#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;

void check_rows(const Tensor& x, int64_t dim, DType want_dtype, const std::string& what) {
  Tensor s = softmax(x, dim), l = log_softmax(x, dim);
  BOOST_TEST(s.dtype() == want_dtype);
  BOOST_TEST(l.dtype() == want_dtype);
  Tolerance tol = tolerance(want_dtype);
  check_close(s, along_dim(x, dim, softmax_line), x.shape(), tol, "softmax " + what);
  if (want_dtype == f32) tol.atol = 1e-5;  // log_softmax subtracts two values of row size
  check_close(l, along_dim(x, dim, log_softmax_line), x.shape(), tol, "log_softmax " + what);
}

}  // namespace

// Every row op of the database (tests/support/op_db.h) against its double reference, f32 and
// f64, each of its shapes, contiguous and with the last two dims transposed in memory.
BOOST_AUTO_TEST_CASE(row_ops_match_their_reference) {
  uint64_t seed = 1000;
  for (const RowOpEntry& e : row_op_db()) {
    for (DType t : {f32, f64}) {
      for (const Shape& shape : e.shapes) {
        for (const std::string kind : {"", "transposed"}) {
          TensorList in = e.inputs(shape, t, seed++, kind);
          Tensor y = e.call(in);
          BOOST_TEST(y.dtype() == t, e.label);
          std::vector<double> want = e.reference(in);
          check_close(y, want, y.shape(), e.against_reference(t),
                      e.label + " " + std::string(name(t)) + " " + to_string(shape) + (kind.empty() ? "" : " " + kind));
          BOOST_TEST(int64_t(want.size()) == numel(y.shape()), e.label << ": the reference has another size");
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_match_reference) {
  uint64_t seed = 1;
  for (DType t : {f32, f64}) {
    for (const Shape& shape : std::vector<Shape>{{}, {1}, {7}, {3, 5}, {2, 3, 4}, {4, 1, 6}, {2, 3, 4, 5}, {9, 100}}) {
      int64_t rank = std::max<int64_t>(int64_t(shape.size()), 1);
      for (int64_t dim = -rank; dim < rank; ++dim) {
        Tensor x = random_tensor(shape, t, seed++, -4, 4);
        check_rows(x, dim, t, std::string(name(t)) + " " + to_string(shape) + " dim " + std::to_string(dim));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_on_large_and_non_contiguous_inputs) {
  uint64_t seed = 100;
  // Long columns (the database's entries take rows, and columns of the shapes they list) and a
  // dim in the middle.
  for (const auto& [shape, dim] : std::vector<std::pair<Shape, int64_t>>{{{3, 5000}, 0}, {{16, 40, 30}, 1}}) {
    Tensor x = random_tensor(shape, f32, seed++, -4, 4);
    check_rows(x, dim, f32, "f32 " + to_string(shape) + " dim " + std::to_string(dim));
  }
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (const Shape& shape : std::vector<Shape>{{6, 9}, {3, 4, 17}}) {
      for (int64_t dim : {0, 1, -1}) {
        Tensor x = random_view(shape, f32, seed++, kind);
        check_rows(x, dim, f32, std::string(kind) + " " + to_string(shape) + " dim " + std::to_string(dim));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_of_half_precision_and_integers) {
  uint64_t seed = 200;
  for (DType t : {f16, bf16}) {
    Tensor x = random_tensor({5, 33}, t, seed++, -3, 3);
    check_rows(x, 1, t, std::string(name(t)));
  }
  // Integer and bool inputs compute in f32, like kiln's other float ops.
  Tensor xi = random_tensor({4, 6}, i32, seed++, -5, 5);
  check_rows(xi, -1, f32, "i32");
  Tensor xb = random_tensor({3, 4}, bool_, seed++);
  check_rows(xb, 0, f32, "bool");
}

BOOST_AUTO_TEST_CASE(softmax_is_stable_and_handles_edges) {
  Tensor x = from_vector<float>({1000, 999, -1000, 0, 88, 89}, {3, 2});
  check_rows(x, 1, f32, "large logits");
  float inf = std::numeric_limits<float>::infinity();
  Tensor y = from_vector<float>({-inf, 0, 1, -inf}, {2, 2});
  check_close(softmax(y, 1), {0, 1, 1, 0}, {2, 2}, "-inf logits");
  Tensor s = from_vector<double>({3.5}, {});
  BOOST_TEST(softmax(s, 0).item<double>() == 1.0);
  BOOST_TEST(log_softmax(s, -1).item<double>() == 0.0);
  Tensor e = random_tensor({0, 4}, f32, 300);
  BOOST_TEST(to_string(softmax(e, 1).shape()) == "[0, 4]");
  BOOST_TEST(to_string(log_softmax(e, 0).shape()) == "[0, 4]");
  check_error([&] { softmax(x, 2); }, {"softmax", "dim 2 out of range"});
  check_error([&] { log_softmax(x, -3); }, {"log_softmax", "out of range"});
}

BOOST_AUTO_TEST_CASE(layer_norm_on_views_half_precision_and_empty) {
  uint64_t seed = 500;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    Tensor x = random_view({6, 12}, f32, seed++, kind);
    Tensor w = random_view({12}, f32, seed++, "sliced"), b = random_tensor({12}, f32, seed++);
    Tolerance tol{2e-5, 1e-5};
    check_close(layer_norm(x, {12}, w, b), layer_norm_reference(x, 12, w, b, 1e-5), {6, 12}, tol,
                std::string("layer_norm ") + kind);
  }
  for (DType t : {f16, bf16}) {
    Tensor x = random_tensor({4, 32}, t, seed++);
    Tensor w = random_tensor({32}, t, seed++), b = random_tensor({32}, t, seed++);
    Tensor y = layer_norm(x, {32}, w, b);
    BOOST_TEST(y.dtype() == t);
    Tolerance tol = tolerance(t);
    tol.atol *= 4;
    check_close(y, layer_norm_reference(x, 32, w, b, 1e-5), {4, 32}, tol, "layer_norm " + std::string(name(t)));
  }
  Tensor xi = random_tensor({3, 5}, i64, seed++, -10, 10);
  check_close(layer_norm(xi, {5}), layer_norm_reference(xi, 5, Tensor(), Tensor(), 1e-5), {3, 5}, {2e-5, 1e-5},
              "layer_norm i64 computes in f32");
  BOOST_TEST(to_string(layer_norm(random_tensor({0, 8}, f32, seed++), {8}).shape()) == "[0, 8]");
}

BOOST_AUTO_TEST_CASE(layer_norm_errors) {
  Tensor x = random_tensor({4, 6}, f32, 600);
  check_error([&] { layer_norm(x, {5}); }, {"layer_norm", "[4, 6]", "does not end with normalized_shape [5]"});
  check_error([&] { layer_norm(x, {2, 4, 6}); }, {"layer_norm", "normalized_shape [2, 4, 6]"});
  check_error([&] { layer_norm(x, {}); }, {"layer_norm", "must not be empty"});
  check_error([&] { layer_norm(x, {6}, random_tensor({5}, f32, 601)); },
              {"layer_norm", "weight shape [5]", "normalized_shape [6]"});
  check_error([&] { layer_norm(x, {6}, Tensor(), random_tensor({1, 6}, f32, 602)); },
              {"layer_norm", "bias shape [1, 6]"});
  check_error([&] { layer_norm(x, {6}, random_tensor({6}, f32, 603), random_tensor({3}, f32, 604)); },
              {"layer_norm", "bias shape [3]"});
}

namespace {

Tensor random_targets(const Shape& shape, int64_t classes, uint64_t seed) {
  return random_tensor(shape, i64, seed, 0, double(classes));
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_views_unbatched_half_and_empty) {
  uint64_t seed = 800;
  Tensor logits = random_view({9, 13}, f32, seed++, "transposed");
  Tensor targets = random_targets({18}, 13, seed++).slice(0, 0, 18, 2);
  check_close(cross_entropy(logits, targets), {cross_entropy_reference(logits, targets)}, {}, {2e-5, 1e-5},
              "transposed logits, strided targets");
  Tensor one = random_tensor({6}, f32, seed++);
  Tensor target = from_vector<int64_t>({4}, {});
  check_close(cross_entropy(one, target), {-log_softmax_line(host_values(one))[4]}, {}, {2e-5, 1e-5},
              "unbatched logits (C) with a 0-d target");
  Tensor half = random_tensor({5, 7}, bf16, seed++);
  Tensor ht = random_targets({5}, 7, seed++);
  Tensor hl = cross_entropy(half, ht);
  BOOST_TEST(hl.dtype() == bf16);
  check_close(hl, {cross_entropy_reference(half, ht)}, {}, tolerance(bf16), "bf16 logits");
  Tensor empty_logits = random_tensor({0, 4}, f32, seed++);
  Tensor empty = cross_entropy(empty_logits, random_targets({0}, 4, seed++));
  BOOST_TEST(std::isnan(empty.item<float>()));
  Tensor big = from_vector<float>({1000, -1000, 0, 500}, {2, 2});
  check_close(cross_entropy(big, from_vector<int64_t>({1, 1})), {1000.0}, {}, "stable for large logits");
}

BOOST_AUTO_TEST_CASE(cross_entropy_errors) {
  Tensor logits = random_tensor({4, 5}, f32, 900);
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 5, 2})); },
              {"cross_entropy", "target 5", "position 2", "5 classes"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, -1, 3, 2})); }, {"cross_entropy", "target -1"});
  check_error([&] { cross_entropy(logits, from_vector<int32_t>({0, 1, 2, 3})); },
              {"cross_entropy", "dtype i64", "i32"});
  check_error([&] { cross_entropy(logits, random_tensor({4}, f32, 901)); }, {"cross_entropy", "dtype i64", "f32"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 2})); },
              {"cross_entropy", "targets of shape [3]", "logits of shape [4, 5]"});
  check_error([&] { cross_entropy(random_tensor({2, 3, 4}, f32, 902), from_vector<int64_t>({0, 1})); },
              {"cross_entropy", "(N, C) or (C)", "[2, 3, 4]"});
  check_error([&] { cross_entropy(random_tensor({5}, f32, 903), from_vector<int64_t>({1})); },
              {"cross_entropy", "targets of shape [1]"});
}
