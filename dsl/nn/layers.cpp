#include "dsl/nn/layers.h"

#include <cmath>

#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln::nn {

namespace {

Tensor uniform(const Shape& s, double bound) { return rand(s) * (2 * bound) - bound; }

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
  KILN_CHECK(in > 0 && out > 0, "nn::Linear: features must be positive, got ", in, " -> ", out);
  double bound = 1.0 / std::sqrt(double(in));
  weight = uniform({out, in}, bound);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = uniform({out}, bound);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Embedding::Embedding(int64_t num, int64_t dim) {
  KILN_CHECK(num > 0 && dim > 0, "nn::Embedding: sizes must be positive, got ", num, " x ", dim);
  weight = randn({num, dim});
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

LayerNorm::LayerNorm(int64_t dim, double eps) : eps(eps) {
  weight = ones({dim});
  bias = zeros({dim});
  register_parameter("weight", weight);
  register_parameter("bias", bias);
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, {weight.size(0)}, weight, bias, eps); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> layers) : layers_(layers) {
  int i = 0;
  for (const auto& l : layers_) register_module(std::to_string(i++), l);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& l : layers_) h = l->forward(h);
  return h;
}

MLP::MLP(const std::vector<int64_t>& widths) {
  KILN_CHECK(widths.size() >= 2, "nn::MLP: needs at least an input and an output width");
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    layers_.push_back(register_module(std::to_string(i), std::make_shared<Linear>(widths[i], widths[i + 1])));
}

Tensor MLP::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i]->forward(h);
    if (i + 1 < layers_.size()) h = gelu(h);
  }
  return h;
}

}  // namespace kiln::nn

namespace kiln::nn {

Dropout::Dropout(double p) : p_(p) {
  KILN_CHECK(p >= 0 && p < 1, "nn::Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  Tensor keep = ge(rand_like(x, is_floating(x.dtype()) ? x.dtype() : DType::f32), p_);
  return x * keep.to(x.dtype()) * (1.0 / (1.0 - p_));
}

}  // namespace kiln::nn
