// Creating tensors: filled, ranges, random (from the one seeded generator), and from host data.
// All but empty() and from_vector() are ops (dsl/ops/creation.cpp), so compiled code records them.
//
//   manual_seed(0);
//   Tensor a = randn({64, 128});                          // f32 on the CPU
//   Tensor i = arange(0, 10, 1, {.dtype = i64});
//   Tensor v = from_vector<float>({1, 2, 3, 4}, {2, 2});
#pragma once
#include <vector>

#include "dsl/error.h"
#include "dsl/tensor.h"

namespace kiln {

Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor arange(double end, TensorOptions opts = {});
Tensor arange(double start, double end, double step = 1, TensorOptions opts = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor rand(const Shape& shape, TensorOptions opts = {});   // uniform in [0, 1)
Tensor randn(const Shape& shape, TensorOptions opts = {});  // standard normal
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = {.dtype = DType::i64});
Tensor rand_like(const Tensor& x, DType dtype = DType::f32);  // uniform in [0, 1), x's shape and device

// Copies host values into a new tensor of `shape` (default: 1-D); T must match a dtype.
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape = {-1});

}  // namespace kiln
