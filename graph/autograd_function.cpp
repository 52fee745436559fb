#include "graph/autograd_function.h"

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "dsl/creation.h"
#include "dsl/error.h"

namespace kiln {

namespace {

struct Halves {
  std::shared_ptr<CompiledGraph> forward, backward;
  int forward_outputs = 0;
  std::vector<int> tangent_of_output;  // per forward output: its tangent's position, or -1
  int tangents = 0;
  std::vector<int> grad_inputs;        // the inputs whose gradients the backward returns
  std::vector<int> saved_from_input;   // per saved tensor: a forward input, or -1 (the next extra output)
};

// The backward of one call: the saved tensors and the upstream gradients (zeros where none came)
// through the compiled backward graph.
TensorList run_backward_graph(const Halves& h, const std::vector<std::pair<Shape, TensorOptions>>& tangent_like,
                              const TensorList& saved, const TensorList& grads) {
  TensorList inputs = saved;
  for (int t = 0; t < h.tangents; ++t) {
    Tensor g = size_t(t) < grads.size() ? grads[size_t(t)] : Tensor();
    const auto& [shape, options] = tangent_like[size_t(t)];
    if (!g.defined()) g = zeros(shape, options);
    if (g.dtype() != options.dtype) g = g.to(options.dtype);
    inputs.push_back(g.contiguous());
  }
  return h.backward->run(inputs);
}

class AutogradFunction final : public CompiledGraph {
 public:
  explicit AutogradFunction(std::shared_ptr<const Halves> h) : h_(std::move(h)) {}

  int kernel_count() const override { return h_->forward->kernel_count(); }

  TensorList run(const TensorList& inputs) const override {
    const Halves& h = *h_;
    TensorList outs;
    {
      NoGradGuard no_grad;  // the forward's eager steps must not record: the node below stands for them
      outs = h.forward->run(inputs);
    }
    TensorList results(outs.begin(), outs.begin() + h.forward_outputs);
    bool record = grad_enabled();
    bool any = false;
    for (int i : h.grad_inputs) any = any || inputs[size_t(i)].requires_grad();
    if (!record || !any) return results;

    auto node = std::make_shared<Node>();
    node->custom_name = "CompiledFunctionBackward";
    for (int i : h.grad_inputs) node->next.push_back(edge_of(inputs[size_t(i)]));
    size_t extra = size_t(h.forward_outputs);
    for (int i : h.saved_from_input) {
      const Tensor& t = i >= 0 ? inputs[size_t(i)] : outs[extra++];
      node->inputs.push_back({t.alias(), t.storage()->version.load()});
    }
    std::vector<std::pair<Shape, TensorOptions>> tangent_like(size_t(h.tangents));
    std::vector<const TensorImpl*> taken;
    for (const Tensor& t : inputs) taken.push_back(&t.impl());
    for (size_t k = 0; k < results.size(); ++k) {
      int t = h.tangent_of_output[k];
      if (t < 0) continue;
      Tensor& r = results[k];
      if (std::find(taken.begin(), taken.end(), &r.impl()) != taken.end()) r = r.alias();  // an input, or twice
      taken.push_back(&r.impl());
      tangent_like[size_t(t)] = {r.shape(), r.options()};
      auto meta = std::make_shared<AutogradMeta>();
      meta->grad_fn = node;
      meta->output_nr = t;
      r.impl().autograd = meta;
    }
    node->custom = [h = h_, tangent_like = std::move(tangent_like)](const TensorList& saved, const TensorList& grads) {
      return run_backward_graph(*h, tangent_like, saved, grads);
    };
    return results;
  }

 private:
  std::shared_ptr<const Halves> h_;
};

}  // namespace

std::shared_ptr<CompiledGraph> make_autograd_function(const Graph& joint, const Partition& p,
                                                      std::shared_ptr<CompiledGraph> forward,
                                                      std::shared_ptr<CompiledGraph> backward) {
  auto h = std::make_shared<Halves>();
  h->forward = std::move(forward);
  h->backward = std::move(backward);
  h->forward_outputs = joint.joint->forward_outputs;
  h->tangent_of_output.assign(size_t(h->forward_outputs), -1);
  for (size_t i = size_t(joint.forward_input_count()); i < joint.inputs.size(); ++i)
    h->tangent_of_output[size_t(joint.inputs[i].index)] = h->tangents++;
  h->grad_inputs = joint.joint->grad_inputs;
  h->saved_from_input = p.saved_from_input;
  return std::make_shared<AutogradFunction>(std::move(h));
}

}  // namespace kiln
