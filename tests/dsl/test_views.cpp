// Views: reshape/view/permute/transpose/expand/squeeze/unsqueeze/slice/narrow give the right
// shape, strides, offset and values (checked against host index arithmetic), share storage with
// their base (a write through one is seen by the other), and copy only where documented.
#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Index = std::vector<int64_t>;

// The storage element (in elements from the storage start) that index `idx` of `t` reads.
int64_t element(const Tensor& t, const Index& idx) {
  int64_t off = t.storage_offset();
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return off;
}

double value_at(const Tensor& t, const Index& idx) {
  return load_as_double(t.storage()->data, t.dtype(), element(t, idx));
}

// Checks a view of `base`: its shape, that it shares storage, and that each of its indices reads
// the element `source(idx)` of base. Then writes through the view and reads the write in base,
// and writes through base and reads the write in the view.
void check_view(const Tensor& base, const Tensor& v, const Shape& shape,
                const std::function<Index(const Index&)>& source, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(to_string(v.shape()) == to_string(shape));
    BOOST_TEST(v.dtype() == base.dtype());
    BOOST_TEST(v.shares_storage_with(base));
    std::vector<double> want;
    for_each_index(shape, [&](const Index& idx) { want.push_back(value_at(base, source(idx))); });
    check_close(v, want, shape, what);
    if (v.numel() == 0) return;
    Index last;
    for (int64_t n : shape) last.push_back(n - 1);
    store_from_double(v.storage()->data, v.dtype(), element(v, last), 1);
    BOOST_TEST(value_at(base, source(last)) == 1);
    store_from_double(base.storage()->data, base.dtype(), element(base, source(last)), 0);
    BOOST_TEST(value_at(v, last) == 0);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(view_ops_strides_and_offsets) {
  Tensor x = random_tensor({2, 3, 4}, f32, 1);
  BOOST_TEST(x.strides() == Strides({12, 4, 1}));
  BOOST_TEST(x.transpose(0, 2).strides() == Strides({1, 4, 12}));
  BOOST_TEST(x.permute({2, 0, 1}).strides() == Strides({1, 12, 4}));
  BOOST_TEST(x.unsqueeze(1).strides() == Strides({12, 12, 4, 1}));
  BOOST_TEST(x.unsqueeze(-1).strides() == Strides({12, 4, 1, 1}));
  Tensor s = x.slice(1, 1, 3).slice(2, 0, 4, 2);
  BOOST_TEST(s.shape() == Shape({2, 2, 2}));
  BOOST_TEST(s.strides() == Strides({12, 4, 2}));
  BOOST_TEST(s.storage_offset() == 4);
  Tensor n = x.narrow(2, 1, 2);
  BOOST_TEST(n.storage_offset() == 1);
  BOOST_TEST(n.strides() == Strides({12, 4, 1}));
  Tensor e = random_tensor({3, 1}, f32, 2).expand({2, 3, 4});
  BOOST_TEST(e.strides() == Strides({0, 1, 0}));
  BOOST_TEST(x.view({6, 4}).strides() == Strides({4, 1}));
  BOOST_TEST(x.view({2, -1}).shape() == Shape({2, 12}));
}

// Every view of the op database (tests/support/op_db.h), in every dtype.
BOOST_AUTO_TEST_CASE(view_ops_read_the_right_elements_and_share_storage) {
  uint64_t seed = 10;
  for (DType t : {f32, f64, f16, bf16, i32, i64, bool_})
    for (const ViewOpEntry& e : view_op_db()) {
      Tensor x = random_tensor(e.base, t, seed++);
      check_view(x, e.call(x), e.shape, e.source, e.label + " " + std::string(name(t)));
    }
}

BOOST_AUTO_TEST_CASE(views_of_views_and_of_non_contiguous_tensors) {
  Tensor x = random_tensor({4, 6, 5}, f64, 30);
  Tensor v = x.transpose(0, 1).slice(0, 1, 5).narrow(2, 1, 3);  // [4, 4, 3]
  check_view(x, v, {4, 4, 3}, [](const Index& i) { return Index{i[1], i[0] + 1, i[2] + 1}; }, "chain");
  // Merging dims that stay contiguous within themselves is a view even for a sliced tensor.
  Tensor s = x.slice(0, 0, 4, 2);  // [2, 6, 5], dims 1 and 2 still dense
  check_view(x, s.view({2, 30}), {2, 30}, [](const Index& i) { return Index{2 * i[0], i[1] / 5, i[1] % 5}; },
             "view of a sliced tensor");
  check_view(x, s.view({2, 3, 2, 5}), {2, 3, 2, 5},
             [](const Index& i) { return Index{2 * i[0], i[1] * 2 + i[2], i[3]}; }, "split a dim of a slice");
  // A transposed tensor can still be split along one of its dims.
  Tensor t = x.transpose(1, 2);  // [4, 5, 6]
  check_view(x, t.view({4, 5, 2, 3}), {4, 5, 2, 3}, [](const Index& i) { return Index{i[0], i[2] * 3 + i[3], i[1]}; },
             "split a dim of a transposed tensor");
  Tensor e = random_tensor({3, 1}, f32, 31).expand({3, 4});
  check_view(e, e.unsqueeze(0).transpose(0, 2), {4, 3, 1}, [](const Index& i) { return Index{i[1], i[0]}; },
             "views of an expanded tensor");
}

BOOST_AUTO_TEST_CASE(zero_dim_and_empty_views) {
  Tensor s = random_tensor({}, f32, 40);
  check_view(s, s.unsqueeze(0), {1}, [](const Index&) { return Index{}; }, "unsqueeze 0-d");
  check_view(s, s.reshape({1, 1}), {1, 1}, [](const Index&) { return Index{}; }, "reshape 0-d");
  check_view(s, s.expand({2, 3}), {2, 3}, [](const Index&) { return Index{}; }, "expand 0-d");
  check_view(s, s.squeeze(), {}, [](const Index&) { return Index{}; }, "squeeze 0-d");
  Tensor one = random_tensor({1}, f32, 41);
  check_view(one, one.reshape({}), {}, [](const Index&) { return Index{0}; }, "reshape to 0-d");
  Tensor e = random_tensor({0, 3}, f32, 42);
  BOOST_TEST(e.view({3, 0}).shape() == Shape({3, 0}));
  BOOST_TEST(e.transpose(0, 1).reshape({0, 3, 1}).shape() == Shape({0, 3, 1}));
  BOOST_TEST(e.slice(1, 1, 2).shape() == Shape({0, 1}));
  BOOST_TEST(random_tensor({3}, f32, 43).slice(0, 2, 1).shape() == Shape({0}));
}

BOOST_AUTO_TEST_CASE(reshape_copies_only_when_the_layout_forbids_a_view) {
  Tensor x = random_tensor({3, 4}, f32, 50);
  Tensor t = x.t();  // [4, 3], not viewable as [12]
  Tensor r = t.reshape({12});
  BOOST_TEST(!r.shares_storage_with(x));
  std::vector<double> want = host_values(t);
  check_close(r, want, {12}, "reshape of a transposed tensor");
  BOOST_TEST(t.reshape({2, 2, 3}).shares_storage_with(x));  // splitting a dim stays a view
  BOOST_TEST(x.reshape({2, 6}).shares_storage_with(x));
  Tensor e = random_tensor({3, 1}, f32, 51).expand({3, 4});
  Tensor er = e.reshape({12});
  BOOST_TEST(!er.shares_storage_with(e));
  check_close(er, host_values(e), {12}, "reshape of an expanded tensor");
  check_error([&] { t.view({12}); }, {"view", "[4, 3]", "[12]", "reshape()"});
  check_error([&] { x.slice(1, 0, 3).view({9}); }, {"view", "[3, 3]", "[4, 1]", "[9]"});
}

BOOST_AUTO_TEST_CASE(contiguous_and_clone) {
  Tensor x = random_tensor({3, 4}, i64, 60);
  Tensor c = x.contiguous();
  BOOST_TEST(c.shares_storage_with(x));
  BOOST_TEST(c.storage_offset() == x.storage_offset());
  Tensor t = x.t();
  Tensor tc = t.contiguous();
  BOOST_TEST(!tc.shares_storage_with(x));
  BOOST_TEST(tc.is_contiguous());
  check_close(tc, host_values(t), {4, 3}, "contiguous of a transposed tensor");
  BOOST_TEST(tc.contiguous().shares_storage_with(tc));
  // A contiguous slice keeps its offset and storage.
  Tensor row = x.slice(0, 1, 2);
  BOOST_TEST(row.contiguous().shares_storage_with(x));
  for (const Tensor& src : {x, t, row, random_view({2, 3}, f16, 61, "expanded")}) {
    Tensor k = src.clone();
    BOOST_TEST(!k.shares_storage_with(src));
    BOOST_TEST(k.is_contiguous());
    check_close(k, host_values(src), src.shape(), "clone");
  }
  // The free function always copies.
  BOOST_TEST(!contiguous(x).shares_storage_with(x));
}

BOOST_AUTO_TEST_CASE(free_functions_match_methods) {
  Tensor x = random_tensor({2, 3, 4}, f32, 70);
  BOOST_TEST(reshape(x, {4, 6}).strides() == x.reshape({4, 6}).strides());
  BOOST_TEST(permute(x, {1, 2, 0}).strides() == x.permute({1, 2, 0}).strides());
  BOOST_TEST(transpose(x, 0, 1).strides() == x.transpose(0, 1).strides());
  BOOST_TEST(unsqueeze(x, 3).shape() == Shape({2, 3, 4, 1}));
  BOOST_TEST(squeeze(unsqueeze(x, 0)).shape() == x.shape());
  BOOST_TEST(slice(x, 2, 1, 3).storage_offset() == 1);
  BOOST_TEST(narrow(x, 0, 1, 1).storage_offset() == 12);
  BOOST_TEST(expand(x.slice(0, 0, 1), {5, 3, 4}).strides() == Strides({0, 4, 1}));
}
