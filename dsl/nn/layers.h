// The basic layers: Linear, Embedding, LayerNorm, ReLU, GELU, Sequential and an MLP, with
// PyTorch's default initialisations (drawn from kiln's seeded generator).
#pragma once
#include <initializer_list>

#include "dsl/nn/module.h"

namespace kiln::nn {

// y = x W^T + b; W and b uniform in +-1/sqrt(in_features).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;  // (out, in), (out) or undefined
};

// Rows of a (num, dim) table, initialised N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim);
  Tensor forward(const Tensor& indices) override;
  Tensor weight;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  double eps;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override;

 private:
  std::string approximate_;
};

class Sequential : public Module {
 public:
  Sequential(std::initializer_list<std::shared_ptr<Module>> layers);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// Linear layers of the given widths with GELU between them: MLP({4, 64, 64, 1}).
class MLP : public Module {
 public:
  explicit MLP(const std::vector<int64_t>& widths);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Linear>> layers_;
};

}  // namespace kiln::nn

namespace kiln::nn {

// Zeroes each element with probability p while training (scaling the rest by 1/(1-p)), using
// kiln's seeded generator; the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.1);
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
};

}  // namespace kiln::nn
