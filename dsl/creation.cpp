#include "dsl/creation.h"

#include <cstring>

#include "dsl/dispatch.h"

namespace kiln {

namespace {

Tensor create(std::string_view op, Attrs a, TensorOptions opts) {
  a.set("dtype", std::string(name(opts.dtype)));
  a.set("device", opts.device.str());
  return dispatch(op_def(op), {}, a)[0];
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opts) { return Tensor::empty(shape, opts); }
Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  return create("full", {{"shape", shape}, {"value", value}}, opts);
}

Tensor arange(double end, TensorOptions opts) { return arange(0, end, 1, opts); }

Tensor arange(double start, double end, double step, TensorOptions opts) {
  return create("arange", {{"start", start}, {"end", end}, {"step", step}}, opts);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  return create("linspace", {{"start", start}, {"end", end}, {"steps", steps}}, opts);
}

Tensor rand(const Shape& shape, TensorOptions opts) { return create("rand", {{"shape", shape}}, opts); }
Tensor randn(const Shape& shape, TensorOptions opts) { return create("randn", {{"shape", shape}}, opts); }

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts) {
  return create("randint", {{"low", low}, {"high", high}, {"shape", shape}}, opts);
}

Tensor rand_like(const Tensor& x, DType dtype) {
  return dispatch(op_def("rand_like"), {x}, {{"dtype", std::string(name(dtype))}})[0];
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
