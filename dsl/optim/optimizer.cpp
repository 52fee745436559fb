#include "dsl/optim/optimizer.h"

#include <cmath>

#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/functions.h"
#include "dsl/kernel_table.h"
#include "dsl/optim/adamw_math.h"
#include "dsl/profiler.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i)
    KILN_CHECK(params_[i].defined() && params_[i].requires_grad() && params_[i].is_leaf(), "optimizer: parameter ",
               i, " must be a leaf tensor that requires grad");
}

void Optimizer::step_unless(const Tensor& skip) {
  KILN_CHECK(skip.defined() && skip.dim() == 0 && skip.dtype() == DType::bool_, "optimizer step_unless: the skip "
             "flag must be a 0-d bool tensor, got ", skip.defined() ? to_string(skip.shape()) : "undefined",
             skip.defined() ? " " + std::string(name(skip.dtype())) : "");
  if (!skip.is_traced()) {
    if (!skip.item<bool>()) step();
    return;
  }
  skip_ = skip;
  struct Clear {
    Tensor& t;
    ~Clear() { t = Tensor(); }
  } clear{skip_};
  step();
}

Tensor Optimizer::unless_skipped(const Tensor& old, const Tensor& updated) const {
  return skip_.defined() ? where(skip_, old, updated) : updated;
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
  RecordFunction record("SGD.step", "optimizer");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor p = params_[i].detach(), g = params_[i].grad().detach();
    if (opts_.weight_decay != 0) g = g + p * opts_.weight_decay;
    if (opts_.momentum != 0) {
      velocity_[i].copy_(unless_skipped(velocity_[i], velocity_[i] * opts_.momentum + g));
      g = velocity_[i];
    }
    p.copy_(unless_skipped(p, p - g * opts_.lr));
  }
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < velocity_.size(); ++i) out.emplace_back("momentum_buffer." + std::to_string(i), velocity_[i]);
  return out;
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < m_.size(); ++i) {
    out.emplace_back("exp_avg." + std::to_string(i), m_[i]);
    out.emplace_back("exp_avg_sq." + std::to_string(i), v_[i]);
  }
  out.emplace_back("step", steps_);
  return out;
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

namespace {

// The fused kernel's update of p, m and v in place, when it applies (eager, not traced; one
// dtype with a kernel, one device, dense); false otherwise.
bool fused_adamw(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& c1,
                 const Tensor& c2, const AdamWOptions& o) {
  for (const Tensor* t : {&p, &g, &m, &v, &c1, &c2})
    if (t->is_traced() || t->dtype() != p.dtype() || t->device() != p.device() || !t->is_contiguous()) return false;
  if (p.dtype() != DType::f32 && p.dtype() != DType::f64) return false;
  KernelDeviceScope device(p.device().is_cuda());
  KernelFn fn = find_kernel("kiln_adamw_" + std::string(name(p.dtype())));
  if (!fn) return false;
  std::vector<int64_t> n{p.numel()}, dense{1};
  KernelBuffer bp(p, n, dense), bg(g, n, dense), bm(m, n, dense), bv(v, n, dense);
  KernelBuffer bc1(c1, {}, {}), bc2(c2, {}, {});
  KernelBuffer op(p, n, dense), om(m, n, dense), ov(v, n, dense);  // written in place
  double lr = o.lr, beta1 = o.beta1, beta2 = o.beta2, eps = o.eps, wd = o.weight_decay;
  call_kernel(fn, {&bp.buf, &bg.buf, &bm.buf, &bv.buf, &bc1.buf, &bc2.buf, &lr, &beta1, &beta2, &eps, &wd, &op.buf,
                   &om.buf, &ov.buf},
              "AdamW");
  for (const Tensor* t : {&p, &m, &v}) t->storage()->written();  // in place, as copy_ writes
  return true;
}

}  // namespace

void AdamW::step() {
  RecordFunction record("AdamW.step", "optimizer");
  steps_.copy_(unless_skipped(steps_, steps_ + 1.0));
  // The bias corrections 1 - beta^t, as tensors: a compiled step must not bake t in.
  TensorOptions scalar = steps_.options();
  Tensor c1 = 1.0 - pow(full({}, opts_.beta1, scalar), steps_);
  Tensor c2 = 1.0 - pow(full({}, opts_.beta2, scalar), steps_);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    Tensor p = params_[i].detach(), g = params_[i].grad().detach();
    if (opts_.fused && !skip_.defined() &&
        fused_adamw(p, g, m_[i], v_[i], c1.to(p.dtype()), c2.to(p.dtype()), opts_))
      continue;
    auto [p1, m1, v1] = adamw_update(p, g, m_[i], v_[i], c1, c2, opts_);
    m_[i].copy_(unless_skipped(m_[i], m1));
    v_[i].copy_(unless_skipped(v_[i], v1));
    p.copy_(unless_skipped(p, p1));
  }
}

}  // namespace kiln::optim
