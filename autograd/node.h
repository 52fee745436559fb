// The tape: each op call that involves tensors requiring grad leaves a Node that knows the op,
// what its derivative rule needs (inputs and outputs, saved as detached aliases with their
// version numbers) and where each input's gradient goes next (another node, or a leaf).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

struct Node;

// Where a gradient flows: output `output_nr` of `node`, or the leaf tensor `leaf`.
struct Edge {
  std::shared_ptr<Node> node;
  int output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool defined() const { return node || leaf; }
};

// Per-tensor autograd state (TensorImpl::autograd).
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                    // leaves: the accumulated gradient
  // Leaves: called once a backward pass has accumulated its last gradient into grad()
  // (Tensor::on_grad_ready), with what a compiled backward traces instead, if anything.
  struct GradReadyHook {
    uint64_t id = 0;  // GradHookHandle's
    std::function<void(const Tensor&)> fn;
    std::shared_ptr<TracedGradHooks> traced;
  };
  std::vector<GradReadyHook> grad_ready_hooks;
  std::shared_ptr<Node> grad_fn;  // non-leaves: the node that made this tensor
  int output_nr = 0;
};

struct SavedTensor {
  Tensor value;  // a detached alias
  uint64_t version = 0;
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<SavedTensor> inputs, outputs;
  std::vector<Edge> next;  // one per input; undefined where no gradient is wanted
  bool released = false;   // saved tensors freed by a backward without retain_graph
  // A node made by a compiled function (graph/autograd_function.h): `custom` runs its compiled
  // backward on `inputs` (the tensors it saved) and returns one gradient per `next` edge.
  std::string custom_name;
  std::function<TensorList(const TensorList& saved, const TensorList& grad_outputs)> custom;

  std::string name() const;  // "MulBackward"
  // Checks versions, then runs the op's derivative rule.
  TensorList apply(const TensorList& grad_outputs) const;
  void release();
};

// A tensor's edge: its grad_fn output, or itself as a leaf when it requires grad.
Edge edge_of(const Tensor& t);

}  // namespace kiln
