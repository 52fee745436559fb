// Eigen interop: from_eigen on col-major and row-major matrices, fixed-size matrices, vectors and
// expressions of every scalar type; to_eigen of 0-d, 1-D, 2-D and non-contiguous tensors; and
// the rank and dtype errors.
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

template <typename Derived>
void check_matches(const Tensor& t, const Eigen::MatrixBase<Derived>& m, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(to_string(t.shape()) == to_string(Shape{int64_t(m.rows()), int64_t(m.cols())}));
    BOOST_TEST(t.is_contiguous());
    std::vector<double> v = host_values(t);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j)
        BOOST_TEST(v[size_t(i * m.cols() + j)] == double(m(i, j)), "(" << i << ", " << j << ")");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(from_eigen_reads_both_storage_orders) {
  std::srand(1);
  Eigen::MatrixXf col = Eigen::MatrixXf::Random(7, 5);
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row =
      Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>::Random(4, 9);
  Tensor tc = from_eigen(col), tr = from_eigen(row);
  BOOST_TEST(tc.dtype() == f32);
  BOOST_TEST(tr.dtype() == f64);
  check_matches(tc, col, "col-major f32");
  check_matches(tr, row, "row-major f64");
  check_matches(from_eigen(col.transpose()), col.transpose(), "transpose expression");
  check_matches(from_eigen(row.block(1, 2, 3, 4)), row.block(1, 2, 3, 4), "block");
  Eigen::MatrixXf sum = col * 2 + Eigen::MatrixXf::Ones(7, 5);
  check_matches(from_eigen(col * 2 + Eigen::MatrixXf::Ones(7, 5)), sum, "arithmetic expression");
  Eigen::Matrix3d fixed = Eigen::Matrix3d::Random();
  check_matches(from_eigen(fixed), fixed, "fixed size");
  check_matches(from_eigen(Eigen::MatrixXf(0, 3)), Eigen::MatrixXf(0, 3), "empty");
}

BOOST_AUTO_TEST_CASE(vectors_stay_two_dimensional) {
  Eigen::VectorXd v = Eigen::VectorXd::Random(6);
  Eigen::RowVectorXf r = Eigen::RowVectorXf::Random(4);
  BOOST_TEST(from_eigen(v).shape() == Shape({6, 1}));
  BOOST_TEST(from_eigen(r).shape() == Shape({1, 4}));
  check_matches(from_eigen(v), v, "column vector");
  check_matches(from_eigen(r), r, "row vector");
  BOOST_TEST(from_eigen(v).flatten().shape() == Shape({6}));
}

BOOST_AUTO_TEST_CASE(every_scalar_type) {
  Eigen::Matrix<int32_t, 2, 3> i32m;
  i32m << 1, -2, 3, -4, 5, 2147483647;
  check_matches(from_eigen(i32m), i32m, "i32");
  BOOST_TEST(from_eigen(i32m).dtype() == i32);
  Eigen::Matrix<int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> i64m(2, 2);
  i64m << (int64_t(1) << 40), -1, 0, 7;
  BOOST_TEST(from_eigen(i64m).dtype() == i64);
  BOOST_TEST(from_eigen(i64m).to_vector<int64_t>() == std::vector<int64_t>({int64_t(1) << 40, -1, 0, 7}));
  Eigen::Matrix<long long, 1, 2> ll(5, -6);
  BOOST_TEST(from_eigen(ll).dtype() == i64);
  Eigen::Matrix<bool, 2, 2> bm;
  bm << true, false, false, true;
  BOOST_TEST(from_eigen(bm).dtype() == bool_);
  check_matches(from_eigen(bm), bm.cast<double>(), "bool");
  Eigen::Matrix<Eigen::half, 1, 3> hm(Eigen::half(0.5f), Eigen::half(-2.0f), Eigen::half(1024.0f));
  Tensor ht = from_eigen(hm);
  BOOST_TEST(ht.dtype() == f16);
  BOOST_TEST(ht.to_vector<double>() == std::vector<double>({0.5, -2, 1024}));
  Eigen::Matrix<Eigen::bfloat16, 2, 1> bf(Eigen::bfloat16(1.5f), Eigen::bfloat16(-0.25f));
  Tensor bt = from_eigen(bf);
  BOOST_TEST(bt.dtype() == bf16);
  BOOST_TEST(bt.to_vector<double>() == std::vector<double>({1.5, -0.25}));
  auto back = to_eigen<Eigen::bfloat16>(bt);
  BOOST_TEST(float(back(1, 0)) == -0.25f);
}

BOOST_AUTO_TEST_CASE(to_eigen_round_trips) {
  std::srand(2);
  Eigen::MatrixXd m = Eigen::MatrixXd::Random(5, 8);
  auto back = to_eigen<double>(from_eigen(m));
  BOOST_TEST(back.rows() == 5);
  BOOST_TEST(back.cols() == 8);
  BOOST_TEST((back - m).cwiseAbs().maxCoeff() == 0);

  Tensor x = random_tensor({3, 4}, f32, 10);
  std::vector<double> xv = host_values(x);
  auto e = to_eigen<float>(x);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) BOOST_TEST(double(e(i, j)) == xv[size_t(i * 4 + j)]);

  Tensor t = random_view({6, 5}, i64, 11, "transposed");  // non-contiguous
  std::vector<double> tv = host_values(t);
  auto te = to_eigen<int64_t>(t);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) BOOST_TEST(double(te(i, j)) == tv[size_t(i * 5 + j)]);
  auto se = to_eigen<float>(random_view({3, 4}, f32, 12, "expanded"));
  check_matches(from_eigen(se), se, "expanded view round trip");

  Tensor v = random_tensor({7}, f64, 13);
  auto ve = to_eigen<double>(v);
  BOOST_TEST(ve.rows() == 7);
  BOOST_TEST(ve.cols() == 1);  // 1-D becomes a column
  BOOST_TEST(ve(6, 0) == host_values(v)[6]);
  auto s = to_eigen<int32_t>(full({}, 9, {.dtype = i32}));
  BOOST_TEST(s.rows() == 1);
  BOOST_TEST(s.cols() == 1);
  BOOST_TEST(s(0, 0) == 9);
  auto z = to_eigen<float>(zeros({0, 4}));
  BOOST_TEST(z.rows() == 0);
  BOOST_TEST(z.cols() == 4);
  auto b = to_eigen<bool>(from_vector<bool>({true, false, true, true}, {2, 2}));
  BOOST_TEST(b(0, 0) == true);
  BOOST_TEST(b(0, 1) == false);

  // Results match an Eigen computation on the same values.
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(4, 3);
  Eigen::MatrixXd prod = a * a.transpose();
  check_matches(from_eigen(prod), prod, "product");
}

BOOST_AUTO_TEST_CASE(to_eigen_errors) {
  check_error([] { to_eigen<float>(zeros({2, 3, 4})); }, {"to_eigen", "[2, 3, 4]", "rank 3", "rank <= 2"});
  check_error([] { to_eigen<float>(zeros({2, 3}, {.dtype = f64})); }, {"to_eigen", "[2, 3]", "f64", "f32", "to(f32)"});
  check_error([] { to_eigen<int64_t>(zeros({2}, {.dtype = i32})); }, {"to_eigen", "i32", "i64"});
  check_error([] { to_eigen<float>(Tensor()); }, {"undefined tensor"});
}
