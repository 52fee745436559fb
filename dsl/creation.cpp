#include "dsl/creation.h"

#include <cmath>
#include <cstring>

#include "dsl/random.h"

namespace kiln {

namespace {

Tensor filled(const Shape& shape, TensorOptions opts, auto&& value_at) {
  Tensor t = Tensor::empty(shape, opts);
  void* p = t.data_ptr();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) store_from_double(p, opts.dtype, i, value_at(i));
  return t;
}

// Uniform in [0, 1) with 24 (f32) or 53 (f64) random bits.
double uniform_from(const std::array<uint32_t, 4>& r, int pair, bool wide) {
  if (!wide) return (r[pair * 2] >> 8) * 0x1.0p-24;
  return ((uint64_t(r[pair * 2]) << 21) ^ (r[pair * 2 + 1] >> 11)) * 0x1.0p-53;
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opts) { return Tensor::empty(shape, opts); }

Tensor zeros(const Shape& shape, TensorOptions opts) {
  Tensor t = Tensor::empty(shape, opts);
  std::memset(t.data_ptr(), 0, size_t(t.numel()) * itemsize(opts.dtype));
  return t;
}

Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  return filled(shape, opts, [&](int64_t) { return value; });
}

Tensor arange(double end, TensorOptions opts) { return arange(0, end, 1, opts); }

Tensor arange(double start, double end, double step, TensorOptions opts) {
  KILN_CHECK(step != 0, "arange: step must be nonzero");
  KILN_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") with step ", step,
             " has the wrong sign");
  auto n = int64_t(std::ceil((end - start) / step));
  return filled({n}, opts, [&](int64_t i) { return start + double(i) * step; });
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  KILN_CHECK(steps >= 0, "linspace: steps must be >= 0, got ", steps);
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0;
  return filled({steps}, opts, [&](int64_t i) {
    return i == steps - 1 && steps > 1 ? end : start + double(i) * step;
  });
}

Tensor rand(const Shape& shape, TensorOptions opts) {
  KILN_CHECK(is_floating(opts.dtype), "rand: dtype must be floating, got ", opts.dtype);
  PhiloxState& g = default_generator();
  uint64_t base = g.offset;
  // f16/bf16 draw on a grid of their mantissa width, so rounding to the dtype never gives 1.
  double grid = opts.dtype == DType::f16 ? 0x1.0p11 : opts.dtype == DType::bf16 ? 0x1.0p8 : 0;
  Tensor t = filled(shape, opts, [&](int64_t i) {
    double u = uniform_from(philox4x32(base + uint64_t(i), g.seed), 0, opts.dtype == DType::f64);
    return grid ? std::floor(u * grid) / grid : u;
  });
  g.offset += uint64_t(t.numel());
  return t;
}

Tensor randn(const Shape& shape, TensorOptions opts) {
  KILN_CHECK(is_floating(opts.dtype), "randn: dtype must be floating, got ", opts.dtype);
  PhiloxState& g = default_generator();
  uint64_t base = g.offset;
  Tensor t = filled(shape, opts, [&](int64_t i) {  // Box-Muller on two uniforms per element
    auto r = philox4x32(base + uint64_t(i), g.seed);
    double u1 = 1.0 - uniform_from(r, 0, true), u2 = uniform_from(r, 1, true);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
  g.offset += uint64_t(t.numel());
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts) {
  KILN_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  PhiloxState& g = default_generator();
  uint64_t base = g.offset, span = uint64_t(high - low);
  Tensor t = filled(shape, opts, [&](int64_t i) {
    auto r = philox4x32(base + uint64_t(i), g.seed);
    return double(low + int64_t(((uint64_t(r[0]) << 32 | r[1]) % span)));
  });
  g.offset += uint64_t(t.numel());
  return t;
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape) {
  if (shape == Shape{-1}) shape = {int64_t(values.size())};
  KILN_CHECK(numel(shape) == int64_t(values.size()), "from_vector: ", values.size(),
             " values do not fill shape ", to_string(shape), " (", numel(shape), " elements)");
  Tensor t = Tensor::empty(shape, {dtype_of<T>(), Device::cpu()});
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t*>(t.data_ptr())[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

template Tensor from_vector<float>(const std::vector<float>&, Shape);
template Tensor from_vector<double>(const std::vector<double>&, Shape);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, Shape);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape);
template Tensor from_vector<bool>(const std::vector<bool>&, Shape);
template Tensor from_vector<Half>(const std::vector<Half>&, Shape);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, Shape);

}  // namespace kiln
