// Backends turn a captured graph into something that runs. CompileOptions::backend names one.
// "eager" (eager_backend.cpp) runs the graph's ops one by one through dispatch(), exactly as the
// function would have run them eagerly (autograd records them too); it stays as the reference
// for bisecting a faster backend. A backend registers itself with register_backend().
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/error.h"
#include "dsl/tensor.h"
#include "graph/graph.h"

namespace kiln {

class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;
  // Inputs in the graph's input order; returns its outputs. May be called from several threads.
  virtual TensorList run(const TensorList& inputs) const = 0;
  // Kernel launches per run (pipelines plus eager kernels); views cost none.
  virtual int kernel_count() const = 0;
};

// What a compiled function asks of its backend beyond the graph.
struct BackendOptions {
  std::string scheduler = "kiln";  // the halide backend: "kiln", or one of Halide's autoschedulers
  std::string label = "graph";     // names the graph's files in the debug dump
  // What the backend's own graph rewrites (Backend::graph_rewrites) changed, for its report.
  std::vector<std::string> rewrites;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Raises kiln::Error for options this backend cannot honour (an unknown scheduler).
  virtual void check(const BackendOptions& options) const {
    if (options.scheduler != "kiln")
      throw_error("compile: the ", name(), " backend has no scheduler '", options.scheduler, "' (only \"kiln\")");
  }
  // Whether its runs record autograd (a graph that needs it goes to "eager" otherwise).
  virtual bool supports_autograd() const { return false; }
  // The composite ops this backend wants decomposed into primitives before compile().
  virtual std::set<std::string> decompositions() const { return {}; }
  // Rewrites of each graph this backend compiles (each half of a joint graph, after partition),
  // run by compile_graph as logged steps of its list, in order: a name and a pass that returns how
  // many places it changed. The halide backend makes CPU GEMM operands dense there.
  struct GraphRewrite {
    const char* name;
    std::function<int(Graph&)> pass;
  };
  virtual std::vector<GraphRewrite> graph_rewrites() const { return {}; }
  // Whether compile() fuses ops into kernels: rewrites that trade one op for several smaller ones
  // (split_long_reductions) pay off only then.
  virtual bool fuses_ops() const { return false; }
  // Whether compile() takes graphs as captured, before any pass (a test backend that moves them
  // to another device and sends them through compile_graph itself, as PyTorch's custom backends
  // see Dynamo's graph before AOTAutograd).
  virtual bool takes_captured_graphs() const { return false; }
  virtual std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& options) = 0;
};

void register_backend(std::shared_ptr<Backend> b);
// The backend called `name`; kiln::Error listing the registered ones otherwise.
Backend& backend(std::string_view name);
std::vector<std::string> backend_names();

}  // namespace kiln
