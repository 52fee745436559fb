#include "autograd/engine.h"

#include <functional>
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

namespace {

// The backward pass running on this thread: its queued callbacks, and for the leaves with
// grad-ready hooks, how many of their incoming edges are still to come.
struct Pass {
  std::vector<std::function<void()>> callbacks;
  std::unordered_map<TensorImpl*, int> edges_left;
  std::unordered_set<TensorImpl*> reached;  // leaves that got a gradient in this pass
};
thread_local Pass* current_pass = nullptr;

bool hooked(const Edge& e) { return e.leaf && e.leaf->autograd && !e.leaf->autograd->grad_ready_hooks.empty(); }

void fire_grad_ready(const std::shared_ptr<TensorImpl>& leaf) {
  Tensor t(leaf);
  for (const auto& hook : std::vector(leaf->autograd->grad_ready_hooks)) hook.fn(t);
}

// One of a hooked leaf's edges is done (its gradient accumulated, or none came along it).
void edge_done(Pass& pass, const Edge& e, bool gave_gradient) {
  if (!hooked(e)) return;
  if (gave_gradient) pass.reached.insert(e.leaf.get());
  if (--pass.edges_left[e.leaf.get()] == 0 && pass.reached.count(e.leaf.get())) fire_grad_ready(e.leaf);
}

// Runs the pass's queued callbacks when it ends, and forgets them if it failed.
class PassScope {
 public:
  PassScope() : outer_(current_pass) { current_pass = &pass_; }
  ~PassScope() { current_pass = outer_; }
  Pass& pass() { return pass_; }
  void finish() {
    // A callback may queue another (as PyTorch's queue_callback allows): run until none is left.
    for (size_t i = 0; i < pass_.callbacks.size(); ++i) {
      std::function<void()> fn = std::move(pass_.callbacks[i]);
      fn();
    }
    pass_.callbacks.clear();
  }

 private:
  Pass pass_;
  Pass* outer_;
};

}  // namespace

void queue_backward_callback(std::function<void()> fn) {
  KILN_CHECK(current_pass, "queue_backward_callback: no backward pass is running on this thread");
  current_pass->callbacks.push_back(std::move(fn));
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
  PassScope scope;
  Pass& pass = scope.pass();
  if (edge.leaf) {
    accumulate_into_leaf(edge.leaf, g);
    if (hooked(edge)) fire_grad_ready(edge.leaf);
    scope.finish();
    return;
  }
  std::unordered_map<Node*, TensorList> pending;
  pending[edge.node.get()].resize(size_t(edge.output_nr) + 1);
  pending[edge.node.get()][edge.output_nr] = g;
  std::vector<Node*> order = topological_order(edge.node.get());
  for (Node* node : order)
    for (const Edge& e : node->next)
      if (hooked(e)) ++pass.edges_left[e.leaf.get()];
  for (Node* node : order) {
    auto it = pending.find(node);
    if (it == pending.end()) {  // no gradient reached it
      for (const Edge& e : node->next) edge_done(pass, e, false);
      continue;
    }
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
      bool has = e.defined() && i < grads.size() && grads[i].defined();
      if (has && e.leaf) {
        accumulate_into_leaf(e.leaf, grads[i]);
      } else if (has) {
        TensorList& slot = pending[e.node.get()];
        if (slot.size() <= size_t(e.output_nr)) slot.resize(size_t(e.output_nr) + 1);
        slot[e.output_nr] = accumulate(slot[e.output_nr], grads[i]);
      }
      edge_done(pass, e, has);
    }
    if (!retain_graph) node->release();
  }
  scope.finish();
}

}  // namespace kiln
