// Optimizers: SGD (momentum, weight decay) and AdamW. step() updates the parameters and the
// optimizer's state in place (copy_: their identity, and so the model's references, stay) with
// tensor ops on detached views, so autograd records nothing; zero_grad() clears the gradients.
// The state is all tensors, the step count too, so a compiled training step (kiln::compile of a
// function that calls step()) holds the whole update in its graph.
//
//   optim::AdamW opt(model.parameters(), {.lr = 1e-3});
//   loss.backward(); opt.step(); opt.zero_grad();
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "dsl/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // A step, or none while `skip` (a 0-d bool tensor) is true: GradScaler's step after an overflow.
  // Eagerly the flag is read on the host (one sync, as PyTorch's GradScaler does); traced inside
  // a compiled step, every update becomes where(skip, old, new) and the graph reads no host value.
  void step_unless(const Tensor& skip);
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }
  // The state tensors, named "<kind>.<parameter index>" ("exp_avg.3") or "<kind>" for one shared
  // by all ("step"): what a compiled or ahead-of-time training step reads and updates besides the
  // parameters (aot/export.h names them after the parameters).
  virtual std::vector<std::pair<std::string, Tensor>> state() const { return {}; }

 protected:
  // `updated`, or `old` (a parameter or a state tensor) while step_unless's traced skip holds.
  Tensor unless_skipped(const Tensor& old, const Tensor& updated) const;

  std::vector<Tensor> params_;
  Tensor skip_;  // set only during a traced step_unless
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  double weight_decay = 0;  // added to the gradient (L2), as in PyTorch's SGD
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions opts);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;  // momentum_buffer.i

 private:
  SGDOptions opts_;
  std::vector<Tensor> velocity_;  // zeros until the first step (then g: 0 * momentum + g)
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p -= lr * weight_decay * p
  // Eagerly, each parameter's update as one kernel (f32 and f64 contiguous tensors; the math of
  // adamw_math.h either way), like PyTorch's AdamW(fused=True): GPT-2 small's 149 parameters took
  // ~2500 kernels a step as composite ops. A compiled step traces the composite ops and fuses them.
  bool fused = true;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions opts);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;  // exp_avg.i, exp_avg_sq.i, step

 private:
  AdamWOptions opts_;
  std::vector<Tensor> m_, v_;
  Tensor steps_;  // 0-d, f64 for f64 parameters else f32, on the first parameter's device
};

}  // namespace kiln::optim
