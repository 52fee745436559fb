// nn::Module: a model's building block. It owns named parameters (leaf tensors that require
// grad) and child modules; named_parameters() walks them with dotted names ("0.weight").
//
//   nn::Sequential mlp({std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
//                       std::make_shared<nn::Linear>(16, 1)});
//   Tensor y = mlp.forward(x);
//   optim::SGD opt(mlp.parameters(), {.lr = 0.1});
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dsl/tensor.h"

namespace kiln::nn {

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;  // parameters are registered by address
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Calls fn on every parameter in named_parameters() order, without building names (cheap
  // enough to run on every call of a compiled module, which checks the parameters' identity).
  void for_each_parameter(const std::function<void(const Tensor&)>& fn) const;
  void train(bool on = true);
  // Moves every parameter (children's too) to `d`: each becomes a new leaf there, with the same
  // values. Make optimizers after the move (they hold the parameters they were given).
  Module& to(Device d);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 protected:
  // Registers `t` as a parameter (it becomes a leaf that requires grad) and returns it.
  Tensor& register_parameter(std::string name, Tensor& t);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

 private:
  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace kiln::nn
