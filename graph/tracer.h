// Tracer: records a function's op calls into graphs. It is a dispatch mode: while it is
// installed, every op on a symbolic tensor adds a node (shapes come from the op's own rule) and
// returns symbolic tensors instead of running. Tensors the function reads from its enclosing
// scope become graph inputs read by reference ("captured").
//
// A graph break (a host read of a symbolic tensor's values: item(), to_vector(), is_nonzero(),
// printing, copy_, backward) ends the current graph: it is run (through the `run` callback, which
// compiles or finds it), every symbolic tensor still alive becomes real in place, and tracing goes
// on in a new graph whose inputs include those tensors ("carried").
#pragma once
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "dsl/dispatch.h"
#include "graph/graph.h"

namespace kiln {

struct GraphBreak {
  std::string reason;
  std::string file;  // the user's source file (base name) and line; "" / 0 when unknown
  int line = 0;
  std::string str() const;  // "model.cpp:42: item(): the value is read on the host"
};

// A leaf whose grad() a backward() recorded inside the graph sets: a captured tensor, or the
// compiled function's argument `argument` (its tensor differs from call to call).
struct GradTarget {
  std::shared_ptr<TensorImpl> leaf;
  int argument = -1;
};

// What a graph does besides returning the function's outputs (its first `function_outputs`
// outputs): the outputs after them are new values for tensors written in place (copy_ into
// `writes[i].first`), then new grad() values for leaves. A cached function without breaks
// replays them after each run.
struct GraphEffects {
  size_t function_outputs = 0;
  std::vector<std::pair<Tensor, int>> writes;      // destination, output index
  std::vector<std::pair<GradTarget, int>> grads;   // leaf, output index
  bool empty() const { return writes.empty() && grads.empty(); }
};

// What the tracer attaches to a symbolic tensor (TensorImpl::traced).
struct TracedValue {
  class Tracer* tracer = nullptr;
  int value = -1;         // in the tracer's current graph
  bool detached = false;  // made by detach(): becomes real without autograd history
  bool dead = false;      // its trace ended and it was not an output: any use is an error
};

class Tracer final : public DispatchMode {
 public:
  struct Options {
    std::string function_name = "fn";
    bool fullgraph = false;
    // Names for captured tensors (module parameters), by TensorImpl address.
    std::unordered_map<const TensorImpl*, std::string> names;
    // Each graph whose outputs carry gradient becomes a joint forward+backward graph
    // (graph/autodiff.h); for backends that do not record autograd themselves.
    bool joint = false;
  };
  // Runs a finished graph on its inputs (bound in graph input order); returns its outputs.
  using RunGraph = std::function<TensorList(std::shared_ptr<Graph> g, const TensorList& inputs)>;

  Tracer(Options options, RunGraph run);
  ~Tracer() override;

  // Symbolic stand-ins for the tensor arguments; dims marked in `dynamic[i]` become symbols
  // (named "arg i dim d"), the others are static.
  TensorList bind_arguments(const TensorList& args, const std::vector<std::vector<bool>>& dynamic);
  TensorList call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) override;
  // The function returned `outputs`: runs the last graph and returns the outputs, real.
  TensorList finish(const TensorList& outputs);
  // The function threw: every symbolic tensor still alive becomes unusable.
  void abort();

  // Hooks (dsl/trace_hooks.h) land here.
  void materialize(const Tensor& t, std::string_view reason, const std::source_location& where);
  void read_sizes(const Tensor& t, int64_t dim, const std::source_location& where);
  Tensor alias(const Tensor& t);
  bool write(const Tensor& dst, const Tensor& src, const std::source_location& where);
  bool backward(const Tensor& root, const Tensor& gradient, const std::source_location& where);

  ShapeEnv& shape_env() { return *env_; }
  const std::shared_ptr<ShapeEnv>& shape_env_ptr() const { return env_; }
  const std::vector<GraphBreak>& breaks() const { return breaks_; }
  int graph_count() const { return graphs_run_; }
  int op_count() const { return ops_traced_; }
  // The symbolic shape of argument i as the trace left it (after unification/specialization).
  SymShape argument_shape(int i) const;
  // The last graph and the tensors bound to its inputs (for a function without breaks, the
  // whole function).
  const std::shared_ptr<Graph>& last_graph() const { return last_graph_; }
  const TensorList& last_bindings() const { return last_bound_; }
  const GraphEffects& last_effects() const { return last_effects_; }
  // The leaves whose gradients a backward() inside the trace computed (they had none before).
  const std::vector<GradTarget>& grad_targets() const { return grad_targets_; }

  static Tracer* current();  // the tracer of this thread's active trace, or null

  // The graph being recorded, and a symbolic tensor for one of its values (graph/autodiff.h).
  Graph& graph() { return *seg_.graph; }
  Tensor symbolic(int value);

 private:
  struct Segment {
    std::shared_ptr<Graph> graph;
    TensorList bound;                                    // real tensors for the graph inputs
    std::unordered_map<const TensorImpl*, int> input_of;  // real tensor -> input value
    std::vector<std::weak_ptr<TensorImpl>> symbolic;      // every symbolic tensor made in it
    // Each value's layout at the probe sizes (see ShapeEnv): a view that is valid at the traced
    // sizes but not at others must not be trusted for all of them.
    std::vector<ViewMeta> probe_layout;
    std::vector<std::pair<Tensor, int>> writes;  // copy_ into a whole real tensor: (it, the new value)
  };
  ViewMeta probe_layout_of_input(const Value& v) const;
  void note_input_probe(int value);
  int value_of(const Tensor& t);
  std::string captured_name(const TensorImpl& impl, int slot) const;
  Tensor make_symbolic(int value, const std::shared_ptr<Storage>& storage, bool detached);
  void new_segment();
  // Runs the current graph with `outputs` plus every live symbolic value, makes them real.
  void run_segment(std::vector<int> outputs, bool final);
  // Appends tangents and the backward to the current graph, making it a joint graph.
  void append_backward(std::vector<int> outputs);

  Options options_;
  RunGraph run_;
  std::shared_ptr<ShapeEnv> env_ = std::make_shared<ShapeEnv>();
  Segment seg_;
  std::vector<SymShape> arg_shapes_;  // symbolic shapes of the arguments
  std::vector<std::shared_ptr<TensorImpl>> made_real_;  // kept alive: their addresses key input_of
  std::unordered_map<const TensorImpl*, SymShape> real_shapes_;
  std::vector<GraphBreak> breaks_;
  int graphs_run_ = 0, ops_traced_ = 0;
  std::shared_ptr<Graph> last_graph_;
  TensorList last_bound_;
  GraphEffects last_effects_;
  std::vector<GradTarget> grad_targets_;
  bool writing_back_ = false;
  Tracer* previous_ = nullptr;
  bool finished_ = false;
};

}  // namespace kiln
