#include "dsl/optim/grad_scaler.h"

#include <cmath>

#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln::optim {

GradScaler::GradScaler(Device device, GradScalerOptions options) : options_(options) {
  KILN_CHECK(std::isfinite(options.init_scale) && options.init_scale > 0, "GradScaler: init_scale must be a finite "
             "positive number, got ", options.init_scale);
  KILN_CHECK(options.growth_factor > 1, "GradScaler: growth_factor must be > 1, got ", options.growth_factor);
  KILN_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), "
             "got ", options.backoff_factor);
  KILN_CHECK(options.growth_interval >= 1, "GradScaler: growth_interval must be >= 1, got ", options.growth_interval);
  TensorOptions f32{.dtype = DType::f32, .device = device};
  scale_ = full({}, options.init_scale, f32);
  found_inf_ = zeros({}, f32);
  tracker_ = zeros({}, f32);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  KILN_CHECK(loss.device() == scale_.device(), "GradScaler.scale: the loss is on ", loss.device(), " but the scaler "
             "was made for ", scale_.device(), " (GradScaler(device))");
  KILN_CHECK(is_floating(loss.dtype()), "GradScaler.scale: the loss must be floating, got ", loss.dtype());
  return loss * scale_.to(loss.dtype());
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!options_.enabled) return;
  KILN_CHECK(!unscaled_, "GradScaler.unscale_: already called since the last update()");
  unscaled_ = true;
  Tensor inv = reciprocal(scale_);
  Tensor nonfinite = zeros({}, scale_.options());  // how many gradient elements are inf or NaN
  for (const Tensor& p : opt.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    KILN_CHECK(g.device() == scale_.device(), "GradScaler.unscale_: a gradient is on ", g.device(), " but the scaler "
               "was made for ", scale_.device());
    // Counted, not compared: a sum of zeros and ones is positive exactly when one element is bad.
    nonfinite = nonfinite + sum(sub(1.0, isfinite(g).to(DType::f32)));
    p.set_grad((g * inv.to(g.dtype())).detach());
  }
  found_inf_.copy_(gt(nonfinite, 0.0).to(DType::f32));
}

void GradScaler::step(Optimizer& opt) {
  if (!options_.enabled) {
    opt.step();
    return;
  }
  if (!unscaled_) unscale_(opt);
  opt.step_unless(gt(found_inf_, 0.0));
}

void GradScaler::update() {
  if (!options_.enabled) return;
  Tensor found = gt(found_inf_, 0.0);
  Tensor clean = where(found, 0.0, tracker_ + 1.0);
  Tensor grow = ge(clean, double(options_.growth_interval));
  Tensor grown = scale_ * options_.growth_factor;
  grown = where(isfinite(grown), grown, scale_);  // never grow past f32's range
  Tensor next = where(found, scale_ * options_.backoff_factor, where(grow, grown, scale_));
  scale_.copy_(next);
  tracker_.copy_(where(grow, 0.0, clean));
  found_inf_.copy_(zeros({}, found_inf_.options()));
  unscaled_ = false;
}

double GradScaler::get_scale() const { return scale_.item<double>(); }

}  // namespace kiln::optim
