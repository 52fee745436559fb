// Eigen interop: copies between Eigen matrices and 2-D tensors (header-only templates).
//
//   Eigen::MatrixXf m = Eigen::MatrixXf::Random(3, 4);
//   Tensor t = from_eigen(m);                          // [3, 4] f32, t[i][j] == m(i, j)
//   auto back = to_eigen<float>(t);                    // Eigen::Matrix<float, -1, -1, RowMajor>
//
// from_eigen takes any dense Eigen expression (col-major, row-major, blocks, products) and
// always returns a 2-D contiguous tensor of shape [rows, cols] holding the values in row-major
// order; a vector stays 2-D ([n, 1] for a column vector, [1, n] for a row vector), so
// to_eigen(from_eigen(m)) gives m back exactly. Use .flatten() for a 1-D tensor.
// to_eigen accepts rank <= 2: a 0-d tensor becomes 1 x 1, a 1-D tensor of n values an n x 1
// column. It never converts dtypes: Scalar must match the tensor's dtype (else kiln::Error
// asking for x.to(dtype)); the tensor must be on the CPU. Non-contiguous tensors are read by
// their logical values.
// Scalar types: float, double, Eigen::half (f16), Eigen::bfloat16 (bf16), 32- and 64-bit signed
// integers (i32, i64) and bool.
#pragma once
#include <Eigen/Core>

#include <cstring>
#include <type_traits>

#include "dsl/error.h"
#include "dsl/tensor.h"

namespace kiln {

namespace eigen_detail {

template <typename S>
inline constexpr bool always_false = false;

template <typename S>
constexpr DType dtype_for() {
  if constexpr (std::is_same_v<S, bool>) return DType::bool_;
  else if constexpr (std::is_same_v<S, float>) return DType::f32;
  else if constexpr (std::is_same_v<S, double>) return DType::f64;
  else if constexpr (std::is_same_v<S, Eigen::half>) return DType::f16;
  else if constexpr (std::is_same_v<S, Eigen::bfloat16>) return DType::bf16;
  else if constexpr (std::is_integral_v<S> && std::is_signed_v<S> && sizeof(S) == 4) return DType::i32;
  else if constexpr (std::is_integral_v<S> && std::is_signed_v<S> && sizeof(S) == 8) return DType::i64;
  else static_assert(always_false<S>, "kiln: no dtype for this Eigen scalar type");
}

static_assert(sizeof(bool) == 1 && sizeof(Eigen::half) == 2 && sizeof(Eigen::bfloat16) == 2,
              "kiln stores bool in 1 byte and f16/bf16 in 2");

template <typename S>
using RowMajorMatrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace eigen_detail

template <typename Derived>
Tensor from_eigen(const Eigen::MatrixBase<Derived>& m) {
  using S = typename Derived::Scalar;
  Tensor t = Tensor::empty({int64_t(m.rows()), int64_t(m.cols())}, {eigen_detail::dtype_for<S>(), Device::cpu()});
  if (t.numel() > 0)
    Eigen::Map<eigen_detail::RowMajorMatrix<S>>(static_cast<S*>(t.data_ptr()), m.rows(), m.cols()) = m;
  return t;
}

template <typename Scalar>
eigen_detail::RowMajorMatrix<Scalar> to_eigen(const Tensor& x) {
  constexpr DType want = eigen_detail::dtype_for<Scalar>();
  KILN_CHECK(x.dim() <= 2, "to_eigen: tensor of shape ", to_string(x.shape()), " has rank ", x.dim(),
             "; Eigen matrices hold rank <= 2 (reshape it first)");
  KILN_CHECK(x.dtype() == want, "to_eigen: tensor of shape ", to_string(x.shape()), " has dtype ", x.dtype(),
             " but the Eigen scalar is ", want, "; convert it with x.to(", want, ") first");
  KILN_CHECK(x.device().is_cpu(), "to_eigen: tensor is on ", x.device(), "; move it with to(Device::cpu()) first");
  Eigen::Index rows = x.dim() >= 1 ? x.size(0) : 1, cols = x.dim() == 2 ? x.size(1) : 1;
  eigen_detail::RowMajorMatrix<Scalar> out(rows, cols);
  if (x.numel() > 0) {
    Tensor c = x.contiguous();
    std::memcpy(static_cast<void*>(out.data()), c.data_ptr(), size_t(c.numel()) * sizeof(Scalar));
  }
  return out;
}

}  // namespace kiln
