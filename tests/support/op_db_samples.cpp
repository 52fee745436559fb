// The op database's entries by sample operands (SampleOpEntry in op_db.h): each reference reads
// its operands' values on the host and computes the output in double, by index arithmetic of its
// own (broadcast offsets, row-major walks), not through another kiln op.
#include <cmath>
#include <limits>

#include "dsl/dispatch.h"
#include "support/op_db.h"

namespace kiln::test {

namespace {

using Values = std::vector<double>;

// where(mask, a, b), all three broadcast to `out`.
Values where_reference(const TensorList& in, const Shape& out) {
  Values m = host_values(in[0]), a = host_values(in[1]), b = host_values(in[2]), r;
  for_each_index(out, [&](const std::vector<int64_t>& i) {
    r.push_back(m[size_t(broadcast_offset(in[0].shape(), i))] != 0 ? a[size_t(broadcast_offset(in[1].shape(), i))]
                                                                    : b[size_t(broadcast_offset(in[2].shape(), i))]);
  });
  return r;
}

// The index of the first largest value along `dim`, for each index of the other dims in row-major
// order (broadcast_offset of an index inside the shape is its row-major offset).
Values argmax_reference(const Tensor& x, int64_t dim) {
  Values v = host_values(x), r;
  Shape kept = x.shape();
  kept[size_t(dim)] = 1;
  for_each_index(kept, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> at = i;
    auto value = [&](int64_t k) {
      at[size_t(dim)] = k;
      return v[size_t(broadcast_offset(x.shape(), at))];
    };
    int64_t best = 0;
    for (int64_t k = 1; k < x.size(dim); ++k)
      if (value(k) > value(best)) best = k;
    r.push_back(double(best));
  });
  return r;
}

// cat along `dim`: output element i reads the operand whose range along dim holds i's index.
Values cat_reference(const TensorList& in, int64_t dim, const Shape& out) {
  std::vector<Values> v;
  for (const Tensor& t : in) v.push_back(host_values(t));
  Values r;
  for_each_index(out, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> at = i;
    size_t k = 0;
    while (at[size_t(dim)] >= in[k].size(dim)) at[size_t(dim)] -= in[k++].size(dim);
    r.push_back(v[k][size_t(broadcast_offset(in[k].shape(), at))]);
  });
  return r;
}

// Rows of a [V, D] table at the indices, in the indices' order.
Values embedding_reference(const TensorList& in) {
  Values table = host_values(in[0]), idx = host_values(in[1]), r;
  const int64_t depth = in[0].size(1);
  for (double row : idx)
    for (int64_t d = 0; d < depth; ++d) r.push_back(table[size_t(int64_t(row) * depth + d)]);
  return r;
}

// The rows of a [N, D] gradient added into a zero [rows, D] table at the N indices.
Values embedding_backward_reference(const TensorList& in, int64_t rows) {
  Values g = host_values(in[0]), idx = host_values(in[1]), r(size_t(rows * in[0].size(1)), 0.0);
  const int64_t depth = in[0].size(1);
  for (size_t n = 0; n < idx.size(); ++n)
    for (int64_t d = 0; d < depth; ++d) r[size_t(int64_t(idx[n]) * depth + d)] += g[n * size_t(depth) + size_t(d)];
  return r;
}

// x with a zero, infinities and a NaN among its values: [2, 7] in dtype t.
Tensor with_non_finite(DType t, uint64_t seed) {
  Values v = host_values(random_tensor({2, 7}, DType::f64, seed));
  const double inf = std::numeric_limits<double>::infinity();
  v[1] = inf;
  v[4] = -inf;
  v[8] = std::nan("");
  v[12] = 0.0;
  return from_vector<double>(v, {2, 7}).to(t);
}

template <typename F>
Values each(const Tensor& x, F f) {
  Values v = host_values(x);
  for (double& e : v) e = f(e);
  return v;
}

Tensor embedding_backward_op(const TensorList& in, int64_t rows) {
  return dispatch(op_def("embedding_backward"), in, Attrs{{"num_rows", rows}})[0];
}

}  // namespace

Tolerance SampleOpEntry::against_reference(DType t) const {
  return exact ? Tolerance{0, 0} : tolerance(result_dtype(t));
}

const std::vector<SampleOpEntry>& sample_op_db() {
  using D = DType;
  auto to_dtype = [](D d) { return [d](D) { return d; }; };
  static const std::vector<SampleOpEntry> db = {
      {"where", "where_broadcast",
       [](D t, uint64_t s) {
         return TensorList{random_tensor({3, 1, 5}, D::bool_, s), random_tensor({3, 4, 5}, t, s + 1),
                           random_tensor({4, 1}, t, s + 2)};
       },
       [](const TensorList& v) { return where(v[0], v[1], v[2]); },
       [](const TensorList& v) { return where_reference(v, {3, 4, 5}); }, {3, 4, 5}, {}, true},
      {"where", "where_of_a_comparison",
       [](D t, uint64_t s) { return TensorList{random_tensor({4, 6}, t, s), random_tensor({6}, t, s + 1)}; },
       [](const TensorList& v) { return where(gt(v[0], v[1]), v[0], v[1] * 2.0); },
       [](const TensorList& v) {
         Values a = host_values(v[0]), b = host_values(v[1]), r;
         for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] > b[i % 6] ? a[i] : b[i % 6] * 2.0);
         return r;
       },
       {4, 6}, {}, true},
      {"cast", "cast_to_i32",  // truncates toward zero
       [](D t, uint64_t s) { return TensorList{random_tensor({3, 5}, t, s, -6, 6)}; },
       [](const TensorList& v) { return v[0].to(D::i32); },
       [](const TensorList& v) { return each(v[0], [](double x) { return std::trunc(x); }); }, {3, 5}, to_dtype(D::i32)},
      {"cast", "cast_to_bool",  // nonzero
       [](D t, uint64_t s) { return TensorList{random_tensor({4, 5}, D::i32, s, -2, 2).to(t)}; },
       [](const TensorList& v) { return v[0].to(D::bool_); },
       [](const TensorList& v) { return each(v[0], [](double x) { return x != 0 ? 1.0 : 0.0; }); }, {4, 5},
       to_dtype(D::bool_)},
      {"cast", "cast_from_i64",
       [](D, uint64_t s) { return TensorList{random_tensor({6}, D::i64, s, -1000, 1000)}; },
       [](const TensorList& v) { return v[0].to(D::f32); },
       [](const TensorList& v) { return host_values(v[0]); }, {6}, to_dtype(D::f32)},
      {"cast", "cast_to_f16",
       [](D t, uint64_t s) { return TensorList{random_tensor({2, 9}, t, s)}; },
       [](const TensorList& v) { return v[0].to(D::f16); },
       [](const TensorList& v) { return host_values(v[0]); }, {2, 9}, to_dtype(D::f16), false, false},
      {"cast", "cast_between_floats",  // f32 <-> f64, differentiable
       [](D t, uint64_t s) { return TensorList{random_tensor({3, 4}, t, s)}; },
       [](const TensorList& v) { return v[0].to(v[0].dtype() == D::f32 ? D::f64 : D::f32) * 1.5; },
       [](const TensorList& v) { return each(v[0], [](double x) { return x * 1.5; }); }, {3, 4},
       [](D t) { return t == D::f32 ? D::f64 : D::f32; }, true, false},
      {"isfinite", "isfinite",
       [](D t, uint64_t s) { return TensorList{with_non_finite(t, s)}; },
       [](const TensorList& v) { return isfinite(v[0]); },
       [](const TensorList& v) { return each(v[0], [](double x) { return std::isfinite(x) ? 1.0 : 0.0; }); }, {2, 7},
       to_dtype(D::bool_)},
      {"argmax", "argmax_last_dim",
       [](D t, uint64_t s) { return TensorList{random_tensor({4, 9}, t, s)}; },
       [](const TensorList& v) { return argmax(v[0], 1); },
       [](const TensorList& v) { return argmax_reference(v[0], 1); }, {4}, to_dtype(D::i64)},
      {"argmax", "argmax_dim0_keepdim",
       [](D t, uint64_t s) { return TensorList{random_view({7, 3, 2}, t, s, "transposed")}; },
       [](const TensorList& v) { return argmax(v[0], 0, true); },
       [](const TensorList& v) { return argmax_reference(v[0], 0); }, {1, 3, 2}, to_dtype(D::i64)},
      {"cat", "cat_dim1_of_three",
       [](D t, uint64_t s) {
         return TensorList{random_tensor({2, 3}, t, s), random_tensor({2, 1}, t, s + 1),
                           random_view({2, 4}, t, s + 2, "transposed")};
       },
       [](const TensorList& v) { return cat({v[0], v[1], v[2]}, 1); },
       [](const TensorList& v) { return cat_reference(v, 1, {2, 8}); }, {2, 8}, {}, true},
      {"cat", "cat_dim0_3d",
       [](D t, uint64_t s) { return TensorList{random_tensor({1, 2, 3}, t, s), random_tensor({3, 2, 3}, t, s + 1)}; },
       [](const TensorList& v) { return cat({v[0], v[1]}, 0); },
       [](const TensorList& v) { return cat_reference(v, 0, {4, 2, 3}); }, {4, 2, 3}, {}, true},
      {"embedding", "embedding_repeated_rows",
       [](D t, uint64_t s) {
         return TensorList{random_tensor({6, 3}, t, s), from_vector<int64_t>({1, 5, 1, 0, 5, 5}, {2, 3})};
       },
       [](const TensorList& v) { return embedding(v[0], v[1]); }, embedding_reference, {2, 3, 3}, {}, true},
      {"embedding", "embedding_i32_indices",
       [](D t, uint64_t s) { return TensorList{random_tensor({9, 4}, t, s), random_tensor({7}, D::i32, s + 1, 0, 9)}; },
       [](const TensorList& v) { return embedding(v[0], v[1]); }, embedding_reference, {7, 4}, {}, true},
      {"embedding_backward", "embedding_backward",  // repeated rows add up
       [](D t, uint64_t s) { return TensorList{random_tensor({11, 5}, t, s), random_tensor({11}, D::i64, s + 1, 0, 4)}; },
       [](const TensorList& v) { return embedding_backward_op(v, 6); },
       [](const TensorList& v) { return embedding_backward_reference(v, 6); }, {6, 5}, {}, false, false},
      {"detach", "detach",
       [](D t, uint64_t s) { return TensorList{random_tensor({3, 4}, t, s)}; },
       [](const TensorList& v) { return v[0].detach(); }, [](const TensorList& v) { return host_values(v[0]); },
       {3, 4}},
      {"contiguous", "contiguous_of_a_transpose",
       [](D t, uint64_t s) { return TensorList{random_view({3, 5}, t, s, "transposed")}; },
       [](const TensorList& v) { return v[0].contiguous(); }, [](const TensorList& v) { return host_values(v[0]); },
       {3, 5}, {}, true},
  };
  return db;
}

}  // namespace kiln::test
