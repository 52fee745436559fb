// cat and stack against a host reference on fresh random inputs: every dim of several ranks,
// every dtype, non-contiguous and empty inputs, dtype promotion, the shape errors, and cat's
// Halide definition run through Halide's JIT (the definition compiled regions will fuse).
#include <cstring>

#include "dsl/halide_def.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Values of cat(xs, d) computed on the host: each output index reads the input whose range
// along d holds it.
std::vector<double> cat_reference(const std::vector<Tensor>& xs, int d, const Shape& out_shape) {
  std::vector<std::vector<double>> vals;
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& x : xs) {
    vals.push_back(host_values(x));
    starts.push_back(start);
    start += x.dim() == int64_t(out_shape.size()) ? x.size(d) : 0;
  }
  std::vector<double> out;
  for_each_index(out_shape, [&](const std::vector<int64_t>& idx) {
    size_t k = xs.size();
    while (k-- > 0)
      if (xs[k].dim() == int64_t(out_shape.size()) && xs[k].size(d) > 0 && idx[d] >= starts[k]) break;
    std::vector<int64_t> src = idx;
    src[d] -= starts[k];
    out.push_back(vals[k][size_t(broadcast_offset(xs[k].shape(), src))]);
  });
  return out;
}

Shape with(Shape s, int d, int64_t n) {
  s[d] = n;
  return s;
}

const std::vector<DType> kAllDTypes = {f32, f64, f16, bf16, i32, i64, bool_};

}  // namespace

BOOST_AUTO_TEST_CASE(cat_every_dim_of_several_ranks_and_dtypes) {
  uint64_t seed = 1;
  for (DType t : kAllDTypes) {
    for (const Shape& base : std::vector<Shape>{{5}, {3, 4}, {2, 3, 5}, {2, 1, 3, 4}, {2, 3, 1, 2, 3}}) {
      int rank = int(base.size());
      for (int d = 0; d < rank; ++d) {
        std::vector<Tensor> xs = {random_tensor(with(base, d, 2), t, seed++),
                                  random_tensor(with(base, d, 1), t, seed++),
                                  random_tensor(with(base, d, 3), t, seed++)};
        Shape out_shape = with(base, d, 6);
        for (int64_t dim : {int64_t(d), int64_t(d - rank)}) {
          Tensor y = cat(xs, dim);
          BOOST_TEST(y.dtype() == t);
          BOOST_TEST(y.is_contiguous());
          check_close(y, cat_reference(xs, d, out_shape), out_shape,
                      "cat " + std::string(name(t)) + " " + to_string(base) + " dim " + std::to_string(dim));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cat_of_non_contiguous_inputs) {
  uint64_t seed = 100;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (int d : {0, 1, 2}) {
      std::vector<Tensor> xs = {random_view(with({4, 5, 6}, d, 3), f32, seed++, kind),
                                random_tensor(with({4, 5, 6}, d, 2), f32, seed++),
                                random_view(with({4, 5, 6}, d, 4), f32, seed++, kind)};
      Shape out_shape = with({4, 5, 6}, d, 9);
      check_close(cat(xs, d), cat_reference(xs, d, out_shape), out_shape,
                  std::string("cat of ") + kind + " views, dim " + std::to_string(d));
    }
  }
}

BOOST_AUTO_TEST_CASE(cat_with_empty_and_single_inputs) {
  Tensor a = random_tensor({2, 3}, f32, 200), b = random_tensor({4, 3}, f32, 201);
  Tensor e = random_tensor({0, 3}, f32, 202);
  check_close(cat({e, a, e, b, e}, 0), cat_reference({a, b}, 0, {6, 3}), {6, 3}, "empty parts");
  check_close(cat({e, e}, 0), {}, {0, 3}, "all parts empty");
  check_close(cat({random_tensor({2, 0}, f32, 203), random_tensor({2, 0}, f32, 204)}, 1), {}, {2, 0},
              "empty along the other dim");
  check_close(cat({a, random_tensor({2, 0}, f32, 205)}, 1), host_values(a), {2, 3}, "empty along cat dim");

  // As in PyTorch, 1-D [0] tensors are skipped whatever the rank of the others.
  Tensor legacy = Tensor::empty({0}, {f32, Device::cpu()});
  check_close(cat({legacy, a, legacy}, 1), host_values(a), {2, 3}, "legacy empty skipped");
  check_close(cat({legacy, legacy}, 0), {}, {0}, "only legacy empties");

  Tensor one = cat({a}, 0);
  check_close(one, host_values(a), {2, 3}, "single input");
  BOOST_TEST(!one.shares_storage_with(a));
  Tensor v = random_view({3, 4}, i64, 206, "transposed");
  check_close(cat({v}, 1), host_values(v), {3, 4}, "single non-contiguous input");
}

BOOST_AUTO_TEST_CASE(cat_many_inputs) {
  std::vector<Tensor> xs;
  int64_t total = 0;
  for (int i = 0; i < 12; ++i) {
    xs.push_back(random_tensor({3, i % 4 + 1, 5}, f64, 300 + i));
    total += i % 4 + 1;
  }
  check_close(cat(xs, 1), cat_reference(xs, 1, {3, total, 5}), {3, total, 5}, "12 inputs");
}

BOOST_AUTO_TEST_CASE(cat_promotes_dtypes) {
  struct Case { DType a, b, want; };
  for (Case c : {Case{i32, f32, f32}, Case{bool_, i64, i64}, Case{f16, bf16, f32}, Case{i64, f64, f64},
                 Case{bool_, f16, f16}, Case{i32, i64, i64}}) {
    Tensor a = random_tensor({2, 3}, c.a, 400), b = random_tensor({1, 3}, c.b, 401);
    Tensor y = cat({a, b}, 0);
    BOOST_TEST(y.dtype() == c.want);
    check_close(y, cat_reference({a, b}, 0, {3, 3}), {3, 3},
                "cat " + std::string(name(c.a)) + " with " + std::string(name(c.b)));
  }
}

BOOST_AUTO_TEST_CASE(stack_matches_unsqueeze_then_cat) {
  uint64_t seed = 500;
  for (DType t : {f32, i64, bool_, bf16}) {
    for (const Shape& s : std::vector<Shape>{{}, {4}, {2, 3}, {2, 3, 4}}) {
      int rank = int(s.size());
      std::vector<Tensor> xs = {random_tensor(s, t, seed++), random_view(s, t, seed++, "sliced"),
                                random_tensor(s, t, seed++)};
      for (int d = -rank - 1; d <= rank; ++d) {
        int w = d < 0 ? d + rank + 1 : d;
        Shape out_shape = s;
        out_shape.insert(out_shape.begin() + w, 3);
        std::vector<double> want;
        std::vector<std::vector<double>> vals;
        for (const Tensor& x : xs) vals.push_back(host_values(x));
        for_each_index(out_shape, [&](const std::vector<int64_t>& idx) {
          std::vector<int64_t> src = idx;
          src.erase(src.begin() + w);
          want.push_back(vals[size_t(idx[w])][size_t(broadcast_offset(s, src))]);
        });
        check_close(stack(xs, d), want, out_shape,
                    "stack " + std::string(name(t)) + " " + to_string(s) + " dim " + std::to_string(d));
      }
    }
  }
  check_close(stack({random_tensor({0, 2}, f32, 600)}, 1), {}, {0, 1, 2}, "stack of one empty tensor");
}

BOOST_AUTO_TEST_CASE(cat_and_stack_errors) {
  Tensor a = random_tensor({2, 3}, f32, 700), b = random_tensor({2, 4}, f32, 701);
  check_error([&] { cat({a, b}, 0); }, {"cat", "[2, 4]", "[2, 3]", "dim 1", "cat dim 0"});
  check_error([&] { cat({a, random_tensor({2, 3, 1}, f32, 702)}, 0); }, {"cat", "[2, 3, 1]", "[2, 3]", "rank"});
  check_error([&] { cat({a, b}, 2); }, {"cat", "dim 2", "rank 2"});
  check_error([&] { cat({a, b}, -3); }, {"cat", "dim -3", "rank 2"});
  check_error([&] { cat({}, 0); }, {"cat", "empty list"});
  check_error([&] { cat({random_tensor({}, f32, 703), random_tensor({}, f32, 704)}, 0); }, {"cat", "0-d"});
  check_error([&] { cat({a, Tensor()}, 0); }, {"cat", "input 1", "undefined"});
  check_error([&] { stack({a, b}, 0); }, {"stack", "[2, 4]", "[2, 3]", "equal shapes"});
  check_error([&] { stack({a, a}, 3); }, {"stack", "dim 3", "[2, 3]", "-3 <= dim <= 2"});
  check_error([&] { stack({}, 0); }, {"stack", "empty list"});
}

// The Halide definition, realized by Halide's JIT on buffers holding the inputs, matches eager cat,
// with mixed input dtypes and an input that is empty along the dim.
BOOST_AUTO_TEST_CASE(cat_halide_definition_matches_eager) {
  using namespace Halide;
  const OpDef& def = op_def("cat");
  BOOST_TEST(name(def.schedule_class) == "data_movement");
  BOOST_TEST(def.num_inputs == -1);
  std::vector<Tensor> xs = {random_tensor({2, 3, 4}, f32, 800), random_tensor({2, 0, 4}, f32, 801),
                            random_tensor({2, 5, 4}, i32, 802), random_tensor({2, 1, 4}, bool_, 803)};
  std::vector<Buffer<>> bufs;
  std::vector<HalideTensor> ins;
  for (const Tensor& x : xs) {
    Tensor c = x.contiguous();
    std::vector<int> extents(c.shape().rbegin(), c.shape().rend());
    Buffer<> b(halide_type(c.dtype()), c.data_ptr(), extents);
    bufs.push_back(b);
    HalideTensor h;
    h.func = Func(bufs.back());
    for (int64_t n : c.shape()) h.shape.push_back(int(n));
    h.dtype = c.dtype();
    ins.push_back(h);
  }
  for (int64_t dim : {int64_t(1), int64_t(-2)}) {
    HalideTensor out = def.define(ins, {{"dim", dim}})[0];
    BOOST_TEST(out.dtype == f32);
    BOOST_TEST(out.rank() == 3);
    Buffer<float> r = out.func.realize({4, 9, 2});
    Tensor got = Tensor::empty({2, 9, 4}, {f32, Device::cpu()});
    std::memcpy(got.data_ptr(), r.data(), sizeof(float) * 72);
    check_close(got, host_values(cat(xs, 1)), {2, 9, 4}, "Halide definition of cat");
  }
}
