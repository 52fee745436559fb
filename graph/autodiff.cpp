#include "graph/autodiff.h"

#include <unordered_map>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "graph/tracer.h"

namespace kiln {

TensorList record_gradients(Tracer& tracer, const std::vector<int>& roots, const TensorList& seeds,
                            const std::vector<int>& wrt) {
  Graph& g = tracer.graph();
  const std::vector<bool> carries = g.grad_carrying_values();
  NoGradGuard no_grad;              // the rules' ops are the backward: not recorded for autograd
  DispatchModeGuard tracing(&tracer);  // and recorded into the graph (also after the function returned)
  std::unordered_map<int, Tensor> grad;
  auto accumulate = [&](int v, Tensor t) {
    DType want = g.values[size_t(v)].meta.dtype;
    if (t.dtype() != want) t = t.to(want);
    Tensor& slot = grad[v];
    slot = slot.defined() ? add(slot, t) : t;
  };
  for (size_t k = 0; k < roots.size(); ++k) accumulate(roots[k], seeds[k]);

  for (size_t n = g.nodes.size(); n-- > 0;) {
    const GraphNode node = g.nodes[n];  // a copy: the rules append nodes
    if (!node.grad_enabled || !is_differentiable(*node.op)) continue;
    TensorList grad_outputs;
    bool reached = false;
    for (int v : node.outputs) {
      auto it = grad.find(v);
      grad_outputs.push_back(it == grad.end() ? Tensor() : it->second);
      reached = reached || grad_outputs.back().defined();
    }
    bool wanted = false;
    for (int v : node.inputs) wanted = wanted || carries[size_t(v)];
    if (!reached || !wanted) continue;
    KILN_CHECK(bool(node.op->derivative), "backward: op ", node.op->name, " has no derivative rule yet");
    TensorList in, out;
    for (int v : node.inputs) in.push_back(tracer.symbolic(v));
    for (int v : node.outputs) out.push_back(tracer.symbolic(v));
    TensorList grads = node.op->derivative(in, out, grad_outputs, node.attrs);
    for (size_t i = 0; i < grads.size() && i < node.inputs.size(); ++i)
      if (grads[i].defined() && carries[size_t(node.inputs[i])]) accumulate(node.inputs[i], grads[i]);
    for (int v : node.outputs) grad.erase(v);
  }
  TensorList result;
  for (int v : wrt) {
    auto it = grad.find(v);
    result.push_back(it == grad.end() ? Tensor() : it->second);
  }
  return result;
}

}  // namespace kiln
