// GradScaler: dynamic loss scaling for f16 training, as PyTorch's torch.amp.GradScaler. The loss
// is multiplied by the scale before backward, so that small gradients survive f16's range; step()
// divides the gradients by it again, checks them for inf and NaN, and skips the optimizer's step
// when it finds any; update() halves the scale after such a step and doubles it after
// `growth_interval` clean steps in a row.
//
//   optim::GradScaler scaler(Device::cuda());
//   { AutocastGuard ac(Device::cuda(), f16); loss = model.loss(x, y); }
//   scaler.scale(loss).backward();
//   scaler.step(opt);      // unscales the gradients, steps unless one is inf or NaN
//   scaler.update();       // the next scale
//   opt.zero_grad();
//
// The state (scale, clean-step count, found-inf flag) is 0-d tensors on the scaler's device and
// every decision is a tensor op, so a compiled training step holds all of it in its graph: eagerly
// step() reads the flag on the host once; traced, the skip is where(found_inf, old, new) on every
// parameter and optimizer state.
#pragma once
#include "dsl/device.h"
#include "dsl/optim/optimizer.h"
#include "dsl/tensor.h"

namespace kiln::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;  // clean steps in a row before the scale grows
  bool enabled = true;         // disabled: scale() returns the loss, step() is opt.step()
};

class GradScaler {
 public:
  explicit GradScaler(Device device = Device::cpu(), GradScalerOptions options = {});

  // loss * scale.
  Tensor scale(const Tensor& loss) const;
  // Divides opt's gradients by the scale (each parameter's .grad() is replaced) and records in
  // found_inf() whether any of them holds an inf or a NaN. At most once between two update()s.
  void unscale_(Optimizer& opt);
  // unscale_(opt) unless already done, then opt.step_unless(found inf).
  void step(Optimizer& opt);
  // The scale for the next iteration; clears the found-inf flag.
  void update();

  const Tensor& scale_tensor() const { return scale_; }      // 0-d f32
  const Tensor& found_inf() const { return found_inf_; }     // 0-d f32: 1 after an overflow
  const Tensor& growth_tracker() const { return tracker_; }  // 0-d f32: clean steps in a row
  double get_scale() const;                                  // reads the scale on the host
  bool enabled() const { return options_.enabled; }

 private:
  GradScalerOptions options_;
  Tensor scale_, found_inf_, tracker_;
  bool unscaled_ = false;
};

}  // namespace kiln::optim
