#include "dsl/nn/module.h"

namespace kiln::nn {

Tensor& Module::register_parameter(std::string name, Tensor& t) {
  t.requires_grad_();
  params_.emplace_back(std::move(name), &t);
  return t;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : params_) out.emplace_back(name, *t);
  for (const auto& [prefix, child] : children_)
    for (auto& [name, t] : child->named_parameters()) out.emplace_back(prefix + "." + name, t);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

void Module::for_each_parameter(const std::function<void(const Tensor&)>& fn) const {
  for (const auto& [name, t] : params_) fn(*t);
  for (const auto& [prefix, child] : children_) child->for_each_parameter(fn);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Module& Module::to(Device d) {
  for (auto& [name, t] : params_)
    if (t->device() != d) *t = t->detach().to(d).requires_grad_();
  for (auto& [name, child] : children_) child->to(d);
  return *this;
}

}  // namespace kiln::nn
