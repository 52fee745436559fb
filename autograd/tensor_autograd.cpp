// The autograd members of Tensor (declared in dsl/tensor.h).
#include <algorithm>
#include <atomic>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/record.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/trace_hooks.h"

namespace kiln {

bool Tensor::requires_grad() const {
  const auto& m = impl().autograd;
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool on) {
  auto& m = impl().autograd;
  KILN_CHECK(!m || !m->grad_fn, "requires_grad_: only leaves can change requires_grad; this tensor was "
             "made by ", grad_fn_name(), " (use detach() for a new leaf)");
  KILN_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating-point tensors can require "
             "grad, this one has dtype ", dtype());
  install_autograd();
  if (!m) m = std::make_shared<AutogradMeta>();
  m->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& m = impl().autograd;
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  auto& m = impl().autograd;
  KILN_CHECK(m || !g.defined(), "set_grad: the tensor does not take part in autograd");
  if (!g.defined() && !m) return;
  KILN_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient of shape ", to_string(g.shape()),
             " for a tensor of shape ", to_string(shape()));
  m->grad = g;
}

GradHookHandle Tensor::on_grad_ready(std::function<void(const Tensor&)> hook,
                                     std::shared_ptr<TracedGradHooks> traced) const {
  KILN_CHECK(is_leaf() && requires_grad(), "on_grad_ready: only leaves that require grad take gradient hooks (this "
             "tensor ", is_leaf() ? "does not require grad" : "was made by " + grad_fn_name(), ")");
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  impl().autograd->grad_ready_hooks.push_back({id, std::move(hook), std::move(traced)});
  return GradHookHandle(impl_ptr(), id);
}

void GradHookHandle::remove() {
  std::shared_ptr<TensorImpl> t = tensor_.lock();
  if (!t || !t->autograd) return;
  auto& hooks = t->autograd->grad_ready_hooks;
  std::erase_if(hooks, [&](const AutogradMeta::GradReadyHook& h) { return h.id == id_; });
  tensor_.reset();
}

bool Tensor::has_grad_ready_hooks() const {
  const auto& m = impl().autograd;
  return m && !m->grad_ready_hooks.empty();
}

std::shared_ptr<TracedGradHooks> Tensor::traced_grad_hooks() const {
  const auto& m = impl().autograd;
  if (!m || m->grad_ready_hooks.size() != 1) return nullptr;
  return m->grad_ready_hooks[0].traced;
}

bool Tensor::is_leaf() const {
  const auto& m = impl().autograd;
  return !m || !m->grad_fn;
}

Tensor Tensor::detach() const {
  if (is_traced()) return trace_hooks().alias(*this);
  return alias();
}

std::string Tensor::grad_fn_name() const {
  const auto& m = impl().autograd;
  return m && m->grad_fn ? m->grad_fn->name() : "";
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph, SourceLocation where) const {
  if (is_traced() && !create_graph && trace_hooks().backward && trace_hooks().backward(*this, gradient, where)) return;
  materialize(*this, "backward(): autograd runs on the host tape", where);
  if (gradient.defined()) materialize(gradient, "backward(): autograd runs on the host tape", where);
  DispatchModesSuspended eager;  // inside a compiled function (after its graph break) it runs now, not traced
  run_backward(*this, gradient, retain_graph, create_graph);
}

}  // namespace kiln
