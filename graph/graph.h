// Graph: the IR of a captured function. Values are tensors: graph inputs, or outputs of nodes.
// A node is one op call (its OpDef, its attributes, its input values). Every value carries the
// metadata the trace saw (shape, dtype, device, strides) and its symbolic shape, where dims that
// vary between calls are symbols ("s0") or products of them ("4*s0").
//
//   Graph g;
//   int x = g.add_input(InputKind::argument, 0, "x", meta, sym, strides);
//   int y = g.add_node(op_def("exp"), {}, {x}, {{meta, sym, strides, 0}})[0];
//   g.outputs = {y};
//   std::cout << g.text();
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "graph/sym_shape.h"

namespace kiln {

enum class InputKind {
  argument,  // a tensor argument of the compiled function (index: its position among them)
  captured,  // a tensor the function read from its enclosing scope, by reference (a parameter)
  carried,   // a tensor an earlier graph of the same call produced (after a graph break)
  tangent,   // joint graphs: the gradient of forward output `index` (graph/autodiff.h)
  saved,     // backward graphs: a value the forward graph saved for it (graph/partition.h)
};
std::string_view name(InputKind k);

struct Value {
  TensorMeta meta;  // shape, dtype, device as traced
  SymShape sym;     // the shape with symbols for dynamic dims
  Strides strides;  // layout as traced
  int64_t offset = 0;
  int producer = -1;  // node index, or -1 for a graph input
  int output_index = 0;
};

struct GraphInput {
  int value = -1;
  InputKind kind = InputKind::argument;
  int index = 0;     // argument: position among the tensor arguments; captured/carried: binding slot
  std::string name;  // "x", "arg1", "qkv.weight"
  bool requires_grad = false;
};

// (Not `Node`: autograd/node.h has kiln::Node, the tape's backward node.)
struct GraphNode {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
  bool grad_enabled = true;  // the grad mode the op was called in (a NoGradGuard inside the function)
};

// A joint forward+backward graph (graph/autodiff.h): its inputs are the forward's, then one
// tangent per forward output that carries gradient; its outputs are the forward's, then the
// gradient of each forward input listed in `grad_inputs` (input positions).
struct JointLayout {
  int forward_outputs = 0;
  std::vector<int> grad_inputs;
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<GraphInput> inputs;
  std::vector<GraphNode> nodes;
  std::vector<int> outputs;  // value ids, in the function's output order
  // The symbols of the symbolic shapes (shared by the graphs of one trace); never null.
  std::shared_ptr<ShapeEnv> shape_env = std::make_shared<ShapeEnv>();
  std::optional<JointLayout> joint;  // set on joint forward+backward graphs
  // The function called backward() inside the graph (a compiled training step): the gradients
  // are graph values, and its ops must not be recorded on the tape again.
  bool backward_traced = false;
  // In-place writes of the function (copy_ into a whole tensor the graph also reads), as {output
  // position, input position}: that output is written back into that input's tensor after the
  // run, so a backend may compute it there directly (the copy then costs nothing).
  std::vector<std::pair<int, int>> writes;
  // A training step's graph (the halves of a joint graph, or one that traced its backward): its
  // parameters change on every call, so the backend does not keep packed copies of them.
  bool trains = false;

  int add_input(InputKind kind, int index, std::string name, const TensorMeta& meta, const SymShape& sym,
                const Strides& strides, int64_t offset = 0, bool requires_grad = false);
  // Appends a node; returns the ids of its output values (described by `outs`).
  std::vector<int> add_node(const OpDef& op, const Attrs& attrs, const std::vector<int>& inputs,
                            std::vector<Value> outs);

  // Appends a node whose outputs' metadata the shape env infers, laid out as the eager op would
  // make them (contiguous; views by their view rule). Returns the output ids.
  std::vector<int> add_inferred_node(const OpDef& op, const Attrs& attrs, const std::vector<int>& inputs);

  int op_count() const { return int(nodes.size()); }
  // Autograd must record this graph's ops: an input requires grad and an op runs with grad on
  // (and the graph did not already trace its own backward).
  bool needs_autograd() const;
  // Whether any value lives on a CUDA device.
  bool on_cuda() const;
  // Per value: whether it carries gradient (it depends on an input that requires grad through
  // differentiable ops run with grad on, and is floating-point).
  std::vector<bool> grad_carrying_values() const;
  // The number of inputs before the tangents (all of them for a graph without a joint).
  int forward_input_count() const;
  // A hash of the structure: ops, attributes, wiring, input kinds, dtypes, devices, layouts and
  // symbolic shapes (static dims by value, symbols by identity). Equal hashes: same graph.
  uint64_t structural_hash() const;

  // One line per input, node and output, with symbolic shapes and dtypes:
  //   %3: f32[s0, 256] = matmul(%0, %2)
  std::string text() const;
  std::string dot() const;  // Graphviz
};

// Every value of `g`, and every op that makes a tensor (its "device" attribute), moved to device
// `d`: a graph traced on one device compiled for another (an ahead-of-time CUDA model traced on a
// machine without a GPU, aot/export.h). Graphs hold no transfers between devices (a move is a
// host operation, a graph break), so no other node names one.
void move_graph_to(Graph& g, Device d);

// "f32[s0, 256]"
std::string value_type_str(const Value& v);

// One node as Graph::text() shows it: "%3: f32[s0, 256] = matmul(%0, %2)".
std::string node_text(const Graph& g, const GraphNode& n);

// The nodes that read each value, in graph order (a node once per input slot that reads it).
std::vector<std::vector<int>> readers_of(const Graph& g);

// The view nodes from a non-view value (the base) to v, in order; empty when v is not a view.
std::vector<int> view_chain(const Graph& g, int v);
// The value v's views start from (v itself when it is no view).
int view_base(const Graph& g, int v);

// Whether g's calls compute the same outputs from unchanged inputs, so that what a call computes
// from its parameters alone may be kept for the next (schedules/kept_outputs.h) and a CUDA graph
// replay reading such kept values must check that the parameters did not change
// (graph/cuda_graphs.h): not a training step, writes no input.
bool graph_keeps_outputs(const Graph& g);

// Whether value a reads value base (dense, [d0, ..., dn]) as [dn, d0*...*dn-1]: the transpose of
// its leading dims flattened (a Linear's output gradient in its weight gradient, dy.flatten(0, -2).t()).
bool transposes_flattened(const Graph& g, int base, int a);

// How a pass rebuilds a graph: a new graph with the old one's inputs and symbols; then each old
// node copied (inputs renumbered) or replaced by new nodes (map its outputs with set()); finish()
// renumbers the outputs.
//   GraphRewrite r(g);
//   for (const GraphNode& n : g.nodes) if (keep(n)) r.copy(n);
//   g = std::move(r).finish();
class GraphRewrite {
 public:
  explicit GraphRewrite(const Graph& g);
  int id(int old_value) const { return id_[size_t(old_value)]; }
  std::vector<int> ids(const std::vector<int>& old_values) const;
  void set(int old_value, int new_value) { id_[size_t(old_value)] = new_value; }
  void copy(const GraphNode& node);
  // `node` of the old graph replaced by the nodes emitted into `out` since `first_new` (the size
  // of out.nodes before emitting them): they take the node's grad mode, and `values` stand for
  // its outputs, which they must match in shape and dtype (else kiln::Error naming `pass`).
  void replace(const GraphNode& node, size_t first_new, const std::vector<int>& values, std::string_view pass);
  Graph finish() &&;

  Graph out;

 private:
  const Graph& g_;
  std::vector<int> id_;
};

}  // namespace kiln
