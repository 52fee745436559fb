#include "graph/autodiff.h"

#include <optional>
#include <unordered_map>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "dsl/autocast.h"
#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "graph/grad_hook_groups.h"
#include "graph/logs.h"
#include "graph/tracer.h"

namespace kiln {

TensorList record_gradients(Tracer& tracer, const std::vector<int>& roots, const TensorList& seeds,
                            const std::vector<int>& wrt,
                            const std::function<void(size_t k, const Tensor& gradient)>& on_final) {
  Graph& g = tracer.graph();
  const std::vector<bool> carries = g.grad_carrying_values();
  NoGradGuard no_grad;              // the rules' ops are the backward: not recorded for autograd
  AutocastSuspended no_autocast;    // they follow the forward's dtypes, as the eager backward
  DispatchModeGuard tracing(&tracer);  // and recorded into the graph (also after the function returned)
  std::unordered_map<int, Tensor> grad;
  auto accumulate = [&](int v, Tensor t) {
    DType want = g.values[size_t(v)].meta.dtype;
    if (t.dtype() != want) t = t.to(want);
    Tensor& slot = grad[v];
    slot = slot.defined() ? add(slot, t) : t;
  };
  for (size_t k = 0; k < roots.size(); ++k) accumulate(roots[k], seeds[k]);

  // The backward of node n, recorded: its outputs' gradients through its derivative rule into its
  // inputs'.
  auto record_node = [&](size_t n) {
    const GraphNode node = g.nodes[n];  // a copy: the rules append nodes
    if (!node.grad_enabled || !is_differentiable(*node.op)) return;
    TensorList grad_outputs;
    bool reached = false;
    for (int v : node.outputs) {
      auto it = grad.find(v);
      grad_outputs.push_back(it == grad.end() ? Tensor() : it->second);
      reached = reached || grad_outputs.back().defined();
    }
    bool wanted = false;
    for (int v : node.inputs) wanted = wanted || carries[size_t(v)];
    if (!reached || !wanted) return;
    TensorList in, out;
    for (int v : node.inputs) in.push_back(tracer.symbolic(v));
    for (int v : node.outputs) out.push_back(tracer.symbolic(v));
    std::vector<bool> needed;
    for (int v : node.inputs) needed.push_back(carries[size_t(v)]);
    TensorList grads = derivative_rule(*node.op)(in, out, grad_outputs, node.attrs, needed);
    for (size_t i = 0; i < grads.size() && i < node.inputs.size(); ++i)
      if (grads[i].defined() && carries[size_t(node.inputs[i])]) accumulate(node.inputs[i], grads[i]);
    for (int v : node.outputs) grad.erase(v);
  };

  // wrt[k]'s gradient is final once the walk has recorded the backward of the first node that
  // reads it (final_after[n]), or at once where no node reads it.
  const size_t forward_nodes = g.nodes.size();
  std::vector<std::vector<size_t>> final_after(forward_nodes);
  std::vector<size_t> final_at_once;
  if (on_final) {
    std::unordered_map<int, size_t> first_reader;
    for (size_t n = forward_nodes; n-- > 0;)
      for (int v : g.nodes[n].inputs) first_reader[v] = n;
    for (size_t k = 0; k < wrt.size(); ++k) {
      auto it = first_reader.find(wrt[k]);
      (it == first_reader.end() ? final_at_once : final_after[it->second]).push_back(k);
    }
  }
  auto report = [&](const std::vector<size_t>& ks) {
    for (size_t k : ks) {
      auto it = grad.find(wrt[k]);
      on_final(k, it == grad.end() ? Tensor() : it->second);
    }
  };
  report(final_at_once);
  for (size_t n = forward_nodes; n-- > 0;) {
    record_node(n);
    report(final_after[n]);
  }
  TensorList result;
  for (int v : wrt) {
    auto it = grad.find(v);
    result.push_back(it == grad.end() ? Tensor() : it->second);
  }
  return result;
}

// The joint graph: one tangent per output that carries gradient, the backward of the whole graph,
// the gradients of the inputs that require grad as extra outputs.
void Tracer::append_backward(std::vector<int> outputs) {
  Graph& g = *seg_.graph;
  std::vector<bool> carries = g.grad_carrying_values();
  std::vector<int> roots, wrt, grad_inputs;
  TensorList seeds;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!carries[size_t(outputs[k])]) continue;
    const Value& o = g.values[size_t(outputs[k])];
    int t = g.add_input(InputKind::tangent, int(k), "tangent" + std::to_string(k), o.meta, o.sym,
                        contiguous_strides(o.meta.shape));
    roots.push_back(outputs[k]);
    seeds.push_back(symbolic(t));
  }
  if (roots.empty()) return;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.inputs[i].requires_grad && g.inputs[i].kind != InputKind::tangent) {
      wrt.push_back(g.inputs[i].value);
      grad_inputs.push_back(int(i));
    }
  TensorList grads = record_gradients(*this, roots, seeds, wrt);
  JointLayout layout{int(outputs.size()), {}};
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    outputs.push_back(value_of(grads[i]));
    layout.grad_inputs.push_back(grad_inputs[i]);
  }
  g.outputs = outputs;
  g.joint = layout;
}

// backward() inside a compiled function: the gradients of the leaves become graph values.
bool Tracer::backward(const Tensor& root, const Tensor& gradient, const std::source_location& where) {
  int root_value = root.impl().traced->value;  // live: the hook checked it
  KILN_CHECK(root.requires_grad(), "backward: the tensor (shape ", to_string(root.impl().shape),
             ") does not require grad and has no backward node");
  Graph& g = *seg_.graph;
  std::vector<int> wrt;
  std::vector<GradTarget> targets;
  TensorList leaves;
  for (size_t i = 0; i < seg_.bound.size(); ++i) {
    if (!g.inputs[i].requires_grad) continue;
    const Tensor& t = seg_.bound[i];
    // A tensor with eager history or a gradient to add to: the eager tape takes over. So does one
    // with grad-ready hooks, unless they have an active traced form (DistributedDataParallel's
    // buckets, guarded on for captured tensors) and it holds no gradient yet.
    const bool hooked = t.has_grad_ready_hooks();
    if (!t.is_leaf() || (t.grad().defined() && (hooked || !t.grad().is_traced()))) return false;
    if (hooked && (g.inputs[i].kind != InputKind::captured || !active_traced_grad_hooks(t))) return false;
    wrt.push_back(g.inputs[i].value);
    targets.push_back({t.impl_ptr(), g.inputs[i].kind == InputKind::argument ? g.inputs[i].index : -1});
    leaves.push_back(t);
  }
  if (wrt.empty()) return false;
  Tensor seed = gradient;
  {
    NoGradGuard no_grad;
    DispatchModeGuard tracing(this);
    if (!seed.defined()) {
      KILN_CHECK(numel(root.impl().shape) == 1, "backward: the tensor has shape ", to_string(root.impl().shape),
                 "; a gradient is implicit only for one-element outputs, pass one of the same shape");
      seed = ones(root.impl().shape, root.options());
    }
    KILN_CHECK(seed.impl().shape == root.impl().shape, "backward: gradient of shape ", to_string(seed.impl().shape),
               " for a tensor of shape ", to_string(root.impl().shape));
  }
  // Traced grad-ready hooks start their groups as the walk makes their gradients final.
  std::optional<GradHookGroups> hook_groups;
  {
    NoGradGuard no_grad;
    DispatchModeGuard tracing(this);
    hook_groups.emplace(leaves);
  }
  std::function<void(size_t, const Tensor&)> on_final;
  if (!hook_groups->empty()) on_final = [&](size_t k, const Tensor& grad) { hook_groups->final(k, grad); };
  TensorList grads = record_gradients(*this, {root_value}, {seed}, wrt, on_final);
  g.backward_traced = true;
  g.trains = true;
  NoGradGuard no_grad;
  DispatchModeGuard tracing(this);
  int set = 0;
  auto set_grad = [&](const GradTarget& target, const Tensor& grad, bool accumulate) {
    Tensor leaf(target.leaf);
    Tensor old = leaf.grad();
    leaf.set_grad(old.defined() && accumulate ? add(old, grad) : grad);
    ++set;
    auto same = [&](const GradTarget& x) { return x.leaf == target.leaf; };
    if (std::find_if(grad_targets_.begin(), grad_targets_.end(), same) == grad_targets_.end())
      grad_targets_.push_back(target);
  };
  for (size_t k = 0; k < grads.size(); ++k)
    if (grads[k].defined() && !hook_groups->handles(k)) set_grad(targets[k], grads[k], true);
  int hooked = 0;
  // The leaves of every group, reached or not, take what the hooks give (they replace grad(), as
  // DistributedDataParallel's eager hooks do).
  for (const auto& [leaf, grad] : hook_groups->finish()) {
    set_grad({leaf.impl_ptr(), -1}, grad, false);
    ++hooked;
  }
  log_line(LogChannel::graph, where, "backward() recorded into graph " + std::to_string(graphs_run_ + 1) + " of " +
                                         options_.function_name + ": gradients of " + std::to_string(set) + " leaves" +
                                         (hooked ? " (" + std::to_string(hooked) + " through traced grad-ready hooks)" : ""));
  return true;
}

}  // namespace kiln
