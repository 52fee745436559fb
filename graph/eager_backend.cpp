// The "eager" backend: a graph runs as the sequence of op calls it recorded, through dispatch().
#include <mutex>
#include <optional>

#include "dsl/error.h"
#include "autograd/grad_mode.h"
#include "dsl/dispatch.h"
#include "graph/backend.h"

namespace kiln {

namespace {

class EagerGraph final : public CompiledGraph {
 public:
  explicit EagerGraph(std::shared_ptr<const Graph> g) : g_(std::move(g)) {}

  int kernel_count() const override {
    int n = 0;
    for (const GraphNode& node : g_->nodes) n += node.op->schedule_class != ScheduleClass::view;
    return n;
  }

  TensorList run(const TensorList& inputs) const override {
    const Graph& g = *g_;
    KILN_CHECK(inputs.size() == g.inputs.size(), "eager backend: graph has ", g.inputs.size(), " inputs, got ",
               inputs.size());
    std::optional<NoGradGuard> no_grad;  // the graph holds its own backward: nothing to record
    if (g.backward_traced) no_grad.emplace();
    std::vector<Tensor> values(g.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) values[size_t(g.inputs[i].value)] = inputs[i];
    TensorList args;
    for (const GraphNode& n : g.nodes) {
      args.clear();
      for (int v : n.inputs) args.push_back(values[size_t(v)]);
      TensorList outs;
      if (g.backward_traced || n.grad_enabled == grad_enabled()) {
        outs = dispatch(*n.op, args, n.attrs);
      } else {  // the op ran under a different grad mode in the function
        bool was = grad_enabled();
        set_grad_enabled(n.grad_enabled);
        try {
          outs = dispatch(*n.op, args, n.attrs);
        } catch (...) {
          set_grad_enabled(was);
          throw;
        }
        set_grad_enabled(was);
      }
      for (size_t k = 0; k < n.outputs.size(); ++k) values[size_t(n.outputs[k])] = std::move(outs[k]);
    }
    TensorList out;
    out.reserve(g.outputs.size());
    for (int v : g.outputs) out.push_back(values[size_t(v)]);
    return out;
  }

 private:
  std::shared_ptr<const Graph> g_;
};

class EagerBackend final : public Backend {
 public:
  std::string_view name() const override { return "eager"; }
  bool supports_autograd() const override { return true; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions&) override {
    return std::make_shared<EagerGraph>(std::move(g));
  }
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Backend>> backends{std::make_shared<EagerBackend>()};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(std::shared_ptr<Backend> b) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& x : r.backends)
    if (x->name() == b->name()) {
      x = std::move(b);
      return;
    }
  r.backends.push_back(std::move(b));
}

Backend& backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& x : r.backends)
    if (x->name() == name) return *x;
  std::string known;
  for (auto& x : r.backends) known += (known.empty() ? "" : ", ") + std::string(x->name());
  throw_error("compile: unknown backend '", name, "' (registered: ", known, ")",
              name == "halide" ? "; the halide backend is kiln::kiln's, and this program links kiln::runtime only" : "");
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (auto& x : r.backends) out.emplace_back(x->name());
  return out;
}

}  // namespace kiln
