#include "dsl/optim/optimizer.h"

#include <cmath>

#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i)
    KILN_CHECK(params_[i].defined() && params_[i].requires_grad() && params_[i].is_leaf(), "optimizer: parameter ",
               i, " must be a leaf tensor that requires grad");
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions opts) : Optimizer(std::move(params)), opts_(opts) {
  KILN_CHECK(opts.lr >= 0 && opts.momentum >= 0 && opts.weight_decay >= 0,
             "SGD: lr, momentum and weight_decay must be >= 0");
  if (opts.momentum != 0)
    for (const Tensor& p : params_) velocity_.push_back(zeros(p.shape(), p.options()));
}

void SGD::step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor p = params_[i].detach(), g = params_[i].grad().detach();
    if (opts_.weight_decay != 0) g = g + p * opts_.weight_decay;
    if (opts_.momentum != 0) {
      velocity_[i].copy_(velocity_[i] * opts_.momentum + g);
      g = velocity_[i];
    }
    p.copy_(p - g * opts_.lr);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions opts) : Optimizer(std::move(params)), opts_(opts) {
  KILN_CHECK(opts.lr >= 0 && opts.eps >= 0 && opts.weight_decay >= 0, "AdamW: lr, eps and weight_decay must be >= 0");
  KILN_CHECK(opts.beta1 >= 0 && opts.beta1 < 1 && opts.beta2 >= 0 && opts.beta2 < 1,
             "AdamW: betas must be in [0, 1), got ", opts.beta1, ", ", opts.beta2);
  for (const Tensor& p : params_) {
    m_.push_back(zeros(p.shape(), p.options()));
    v_.push_back(zeros(p.shape(), p.options()));
  }
  // f64 for f64 parameters (the bias corrections keep their precision), else f32.
  bool f64 = !params_.empty() && params_[0].dtype() == DType::f64;
  steps_ = zeros({}, {.dtype = f64 ? DType::f64 : DType::f32, .device = params_.empty() ? Device::cpu() : params_[0].device()});
}

void AdamW::step() {
  steps_.copy_(steps_ + 1.0);
  // The bias corrections 1 - beta^t, as tensors: a compiled step must not bake t in.
  TensorOptions scalar = steps_.options();
  Tensor c1 = 1.0 - pow(full({}, opts_.beta1, scalar), steps_);
  Tensor c2 = 1.0 - pow(full({}, opts_.beta2, scalar), steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor p = params_[i].detach(), g = params_[i].grad().detach();
    m_[i].copy_(m_[i] * opts_.beta1 + g * (1 - opts_.beta1));
    v_[i].copy_(v_[i] * opts_.beta2 + square(g) * (1 - opts_.beta2));
    Tensor update = (m_[i] / c1) / (sqrt(v_[i] / c2) + opts_.eps);
    p.copy_(p * (1 - opts_.lr * opts_.weight_decay) - update * opts_.lr);
  }
}

}  // namespace kiln::optim
