#include "autograd/engine.h"

#include <optional>
#include <unordered_map>
#include <utility>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "dsl/autocast.h"
#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "dsl/profiler.h"

namespace kiln {

namespace {

thread_local BackwardNodeObserver* node_observer = nullptr;

// Tells the observer, if any, about a node for the scope's lifetime; `name()` makes its name, only
// when someone listens (the backward's hot path pays nothing else).
class Observed {
 public:
  template <typename Name>
  explicit Observed(Name name) {
    if (!node_observer) return;
    name_ = name();
    node_observer->before(name_);
  }
  ~Observed() {
    if (node_observer) node_observer->after(name_);
  }
  Observed(const Observed&) = delete;
  Observed& operator=(const Observed&) = delete;

 private:
  std::string name_;
};

Tensor accumulate(const Tensor& acc, const Tensor& g) { return acc.defined() ? add(acc, g) : g; }

void accumulate_into_leaf(const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) {
  Observed observed([] { return std::string("accumulate_grad"); });
  AutogradMeta& meta = *leaf->autograd;
  Tensor grad = g.dtype() == leaf->dtype ? g : g.to(leaf->dtype);
  meta.grad = meta.grad.defined() ? add(meta.grad, grad) : grad.contiguous();
}

// Nodes reachable from `root`, ordered so that every node comes after all nodes that feed it
// gradients (reverse post-order of a depth-first walk).
std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> post;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, i] = stack.back();
    if (i < node->next.size()) {
      Node* child = node->next[i++].node.get();
      if (child && seen.insert(child).second) stack.push_back({child, 0});
    } else {
      post.push_back(node);
      stack.pop_back();
    }
  }
  return {post.rbegin(), post.rend()};
}

}  // namespace

BackwardNodeObserver* set_backward_node_observer(BackwardNodeObserver* observer) {
  std::swap(observer, node_observer);
  return observer;
}

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph, bool create_graph) {
  Edge edge = edge_of(root);
  KILN_CHECK(edge.defined(), "backward: the tensor (shape ", to_string(root.shape()),
             ") does not require grad and has no backward node");
  Tensor g = gradient;
  if (!g.defined()) {
    KILN_CHECK(root.numel() == 1, "backward: the tensor has shape ", to_string(root.shape()),
               "; a gradient is implicit only for one-element outputs, pass one of the same shape");
    g = ones(root.shape(), root.options());
  }
  KILN_CHECK(g.shape() == root.shape(), "backward: gradient of shape ", to_string(g.shape()),
             " for a tensor of shape ", to_string(root.shape()));
  if (create_graph && edge.node)
    for (Node* node : topological_order(edge.node.get()))
      KILN_CHECK(!node->custom, "backward(create_graph=true): higher-order gradients cannot go through ", node->name(),
                 ": a compiled function's backward is a compiled graph, which cannot be differentiated");
  KILN_CHECK(!create_graph, "backward(create_graph=true): higher-order gradients are not supported yet (the tape "
             "saves detached tensors)");
  NoGradGuard no_grad;
  AutocastSuspended no_autocast;  // derivative rules follow the forward's dtypes, as PyTorch's backward
  if (edge.leaf) {
    accumulate_into_leaf(edge.leaf, g);
    return;
  }
  std::unordered_map<Node*, TensorList> pending;
  pending[edge.node.get()].resize(size_t(edge.output_nr) + 1);
  pending[edge.node.get()][edge.output_nr] = g;
  for (Node* node : topological_order(edge.node.get())) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // no gradient reached it
    TensorList grads;
    {
      Observed observed([node] { return node->name(); });
      std::optional<RecordFunction> record;
      if (profiling()) record.emplace(node->name(), "backward");
      grads = node->apply(it->second);
    }
    pending.erase(it);
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.defined() || i >= grads.size() || !grads[i].defined()) continue;
      if (e.leaf) {
        accumulate_into_leaf(e.leaf, grads[i]);
      } else {
        TensorList& slot = pending[e.node.get()];
        if (slot.size() <= size_t(e.output_nr)) slot.resize(size_t(e.output_nr) + 1);
        slot[e.output_nr] = accumulate(slot[e.output_nr], grads[i]);
      }
    }
    if (!retain_graph) node->release();
  }
}

}  // namespace kiln
