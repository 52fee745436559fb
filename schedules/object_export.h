// Ahead-of-time export of a compiled graph's code (aot/export.h builds on it). While an
// ObjectExport is open on a thread, the halide backend compiles every graph that thread compiles
// without the disk cache: each graph's region functions are named after the export's prefix
// ("tiny_mlp_g0_region_3", so several graphs and several models link into one program), their
// objects are combined into one relocatable object in the export's folder, and the graph's plan
// (plan_file.h) is recorded as text. The graph still runs in process, as any compiled graph.
//
//   ObjectExport exporting(dir, "tiny_mlp");
//   f(x);                                   // traces and compiles through the halide backend
//   for (const ExportedGraph& g : exporting.graphs()) ...  // g.plan, g.functions, g.object
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <Halide.h>

#include "schedules/graph_executor.h"

namespace kiln {

// A condition on a size of the function's argument `argument`, dim `dim`: equal to `value`, or,
// with `modulus`, leaving `value` when divided by it ("x.1 % 64 == 0"). Every pipeline whose
// sizes include that dim gets a specialize() branch for it: the same schedule, compiled knowing
// the condition (vector tails and bounds checks fall away), beside the generic code.
struct SizeCondition {
  int argument = 0;
  int dim = 0;
  int64_t modulus = 0;
  int64_t value = 0;
  std::string text;  // as the user wrote it
};

struct ExportedGraph {
  std::string prefix;  // of its functions' names: "<export prefix>_g<index>"
  std::string label;   // the graph's label in logs ("forward graph 1")
  std::string plan;    // write_plan()'s text
  std::shared_ptr<const Graph> graph;  // the graph the plan runs (after every graph pass)
  std::vector<std::string> functions;  // the names of its regions' functions, each once
  std::vector<std::string> specialized;  // "region 2: x.1 % 64 == 0", each branch added
  std::string object;  // the path of its regions' combined object; empty for a graph without regions
};

// Letters, digits and '_', not starting with a digit: a function prefix, a model's name.
bool is_c_identifier(const std::string& s);

class ObjectExport {
 public:
  // `prefix` must be a C identifier; `dir` is created when missing. `targets`: the Halide targets
  // regions are compiled for. CPU targets are for CPU regions (several make a library that picks
  // the best one at run time); a target with the CUDA feature, alone, is for CUDA regions (its
  // CPU part runs the host side). Empty: this machine's, aot_target().
  ObjectExport(std::string dir, std::string prefix, std::vector<SizeCondition> conditions = {},
               std::vector<Halide::Target> targets = {});
  ~ObjectExport();
  ObjectExport(const ObjectExport&) = delete;
  ObjectExport& operator=(const ObjectExport&) = delete;

  // The export open on this thread, or null.
  static ObjectExport* current();

  const std::vector<ExportedGraph>& graphs() const { return graphs_; }
  const std::string& dir() const { return dir_; }
  const std::vector<SizeCondition>& conditions() const { return conditions_; }
  // The targets a region is compiled for: the export's when they are for its kind (CUDA or CPU),
  // else empty (this machine's).
  std::vector<Halide::Target> targets_for(bool cuda) const;
  // For the backend: a specialize() branch it added to the current graph's region.
  void note_specialized(std::string what);

  // For the backend: starts the next graph and returns its function prefix; then its objects
  // (combined into one in dir()) and its plan.
  std::string begin_graph(const std::string& label);
  void add_objects(const std::vector<std::string>& objects);
  void finish_graph(const ExecutorPlan& plan);

 private:
  std::string dir_, prefix_;
  std::vector<SizeCondition> conditions_;
  std::vector<Halide::Target> targets_;
  std::vector<ExportedGraph> graphs_;
  ObjectExport* outer_ = nullptr;
};

}  // namespace kiln
