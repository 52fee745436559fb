// embedding against a host gather on fresh random tables: every weight dtype, i32 and i64 indices
// of several shapes (0-d, empty, non-contiguous), non-contiguous weights, and every error path.
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Tensor random_indices(const Shape& shape, int64_t rows, DType t, uint64_t seed) {
  Tensor u = random_tensor(shape, f64, seed, 0, double(rows));
  std::vector<double> v = host_values(u);
  Tensor out = Tensor::empty(shape, {t, Device::cpu()});
  for (size_t i = 0; i < v.size(); ++i) store_from_double(out.data_ptr(), t, int64_t(i), double(int64_t(v[i])));
  return out;
}

std::vector<double> gather_ref(const Tensor& weight, const Tensor& indices) {
  std::vector<double> w = host_values(weight), want;
  int64_t d = weight.size(1);
  for (double i : host_values(indices))
    for (int64_t j = 0; j < d; ++j) want.push_back(w[int64_t(i) * d + j]);
  return want;
}

Shape out_shape(const Tensor& weight, const Tensor& indices) {
  Shape s = indices.shape();
  s.push_back(weight.size(1));
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(embedding_gathers_rows_for_every_dtype) {
  uint64_t seed = 1;
  for (DType wt : {f32, f64, f16, bf16, i32, i64, bool_}) {
    for (DType it : {i32, i64}) {
      for (const Shape& is : std::vector<Shape>{{}, {1}, {7}, {2, 3}, {2, 1, 4}, {0}, {3, 0}}) {
        for (int64_t d : {1, 5, 37}) {
          Tensor weight = random_tensor({11, d}, wt, seed++);
          Tensor idx = random_indices(is, 11, it, seed++);
          Tensor got = embedding(weight, idx);
          BOOST_TEST(got.dtype() == wt);
          check_close(got, gather_ref(weight, idx), out_shape(weight, idx), {0, 0},
                      "embedding " + std::string(name(wt)) + " idx " + std::string(name(it)) + " " + to_string(is) +
                          " d=" + std::to_string(d));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(embedding_large_and_non_contiguous) {
  uint64_t seed = 1000;
  Tensor table = random_tensor({500, 64}, f32, seed++);
  Tensor idx = random_indices({40, 30}, 500, i64, seed++);  // big enough for the parallel path
  check_close(embedding(table, idx), gather_ref(table, idx), out_shape(table, idx), {0, 0}, "large");

  Tensor wt = random_view({20, 9}, f32, seed++, "transposed");
  Tensor ws = random_view({20, 9}, f64, seed++, "sliced");
  Tensor idx_t = random_indices({6, 4}, 20, i32, seed++).t();  // non-contiguous indices
  for (const Tensor& w : {wt, ws})
    check_close(embedding(w, idx_t), gather_ref(w, idx_t), out_shape(w, idx_t), {0, 0}, "views");

  Tensor first_last = from_vector<int64_t>({0, 19, 19, 0});
  check_close(embedding(wt, first_last), gather_ref(wt, first_last), {4, 9}, {0, 0}, "edge rows");
}

BOOST_AUTO_TEST_CASE(embedding_errors) {
  Tensor w = zeros({5, 3});
  check_error([&] { embedding(w, from_vector<int64_t>({0, 5})); },
              {"embedding", "index 5", "out of range", "5 rows", "[5, 3]", "[0, 5)"});
  check_error([&] { embedding(w, from_vector<int32_t>({-1})); }, {"embedding", "index -1", "out of range"});
  check_error([&] { embedding(zeros({0, 3}), from_vector<int64_t>({0})); }, {"embedding", "index 0", "0 rows"});
  check_error([&] { embedding(w, from_vector<float>({1.0f})); }, {"embedding", "i32 or i64", "f32"});
  check_error([&] { embedding(zeros({5}), from_vector<int64_t>({1})); }, {"embedding", "weight must be 2-D", "[5]"});
  check_error([&] { embedding(zeros({2, 5, 3}), from_vector<int64_t>({1})); }, {"embedding", "2-D", "[2, 5, 3]"});
}

BOOST_AUTO_TEST_CASE(embedding_backward_scatter_adds_rows) {
  // Big enough for the vectorized, parallel path; indices repeat so rows collect several adds.
  for (DType t : {f32, f64}) {
    for (DType it : {i32, i64}) {
      const int64_t V = 37, D = 200, N = 500;
      Tensor weight = random_tensor({V, D}, t, 70).requires_grad_();
      Tensor idx = random_tensor({N}, it, 71, 0, double(V));
      Tensor g = random_tensor({N, D}, t, 72);
      embedding(weight, idx).backward(g);
      std::vector<double> gv = host_values(g), iv = host_values(idx), want(size_t(V * D), 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t d = 0; d < D; ++d) want[size_t(int64_t(iv[n]) * D + d)] += gv[size_t(n * D + d)];
      check_close(weight.grad(), want, {V, D}, {1e-5, 1e-5}, "scatter-add " + std::string(name(t)) + " " + std::string(name(it)));
    }
  }
}
