// Graphs built by hand for the graph pass and schedule tests (tests/graph/, tests/schedules/),
// checked for validity, and run op by op through dispatch() on fresh random inputs.
#pragma once
#include <boost/test/unit_test.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dsl/dispatch.h"
#include "graph/graph.h"
#include "support/reference.h"

namespace kiln::test {

// Appends inputs and ops with the metadata the shape env infers (views through their view rule).
struct Builder {
  Builder() = default;
  explicit Builder(Device d) : device(d) {}

  Graph g;
  Device device = Device::cpu();  // metadata only: nothing runs on it
  int input(const Shape& s, DType t = f32) {
    return g.add_input(InputKind::argument, int(g.inputs.size()), "arg" + std::to_string(g.inputs.size()),
                       {s, t, device}, static_shape(s), contiguous_strides(s));
  }
  int op(const char* name, const std::vector<int>& ins, const Attrs& a = {}) {
    return g.add_inferred_node(op_def(name), a, ins)[0];
  }
  // An f32 scalar constant (full).
  int scalar(double v) {
    return op("full", {}, {{"shape", Shape{}}, {"value", v}, {"dtype", std::string("f32")}, {"device", device.str()}});
  }
};

inline int count_op(const Graph& g, const std::string& name) {
  int n = 0;
  for (const GraphNode& node : g.nodes) n += node.op->name == name;
  return n;
}

// Values in topological order, producers consistent, every id in range.
inline void check_valid(const Graph& g) {
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (int v : g.nodes[n].inputs) {
      BOOST_TEST_REQUIRE(v >= 0);
      BOOST_TEST_REQUIRE(v < int(g.values.size()));
      int p = g.values[v].producer;
      BOOST_TEST(p < int(n));
    }
    for (int v : g.nodes[n].outputs) BOOST_TEST(g.values[v].producer == int(n));
  }
  for (const GraphInput& in : g.inputs) BOOST_TEST(g.values[in.value].producer == -1);
  for (int v : g.outputs) BOOST_TEST_REQUIRE((v >= 0 && v < int(g.values.size())));
}

// Runs the graph op by op through dispatch(), checking each value against its metadata.
inline std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& args) {
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i].value] = args[i];
  for (const GraphNode& n : g.nodes) {
    TensorList ins;
    for (int v : n.inputs) ins.push_back(vals[v]);
    TensorList outs = dispatch(*n.op, ins, n.attrs);
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& want = g.values[n.outputs[k]];
      BOOST_TEST_REQUIRE(to_string(outs[k].shape()) == to_string(want.meta.shape));
      BOOST_TEST(outs[k].dtype() == want.meta.dtype);
      for (size_t d = 0; d < want.meta.shape.size(); ++d)
        if (want.meta.shape[d] != 1) BOOST_TEST(outs[k].strides()[d] == want.strides[d]);
      vals[n.outputs[k]] = outs[k];
    }
  }
  std::vector<Tensor> out;
  for (int v : g.outputs) out.push_back(vals[v]);
  return out;
}

inline std::vector<Tensor> random_args(const Graph& g, uint64_t seed) {
  std::vector<Tensor> args;
  for (const GraphInput& in : g.inputs) {
    const TensorMeta& m = g.values[in.value].meta;
    args.push_back(random_tensor(m.shape, m.dtype, seed++));
  }
  return args;
}

// g with its values' metadata, and the device of the nodes that create tensors, moved to the CPU.
inline Graph on_cpu(Graph g) {
  for (Value& v : g.values) v.meta.device = Device::cpu();
  for (GraphNode& n : g.nodes)
    if (n.attrs.has("device")) n.attrs.set("device", std::string("cpu"));
  return g;
}

// A CUDA graph before and after a CUDA-only pass, both run on the CPU (on_cpu): the pass may
// change layouts and ops, never the values, on fresh random inputs (within `tol`, else the
// outputs' dtype's tolerance). Returns the inputs and the outputs after the pass, for references.
struct SameOnCpu {
  std::vector<Tensor> args, got;
};
inline SameOnCpu check_same_on_cpu(const Graph& before, const Graph& after, uint64_t seed, const std::string& what,
                                   std::optional<Tolerance> tol = std::nullopt) {
  Graph b = on_cpu(before), a = on_cpu(after);
  std::vector<Tensor> args = random_args(b, seed);
  std::vector<Tensor> want = run(b, args), got = run(a, args);
  for (size_t o = 0; o < want.size(); ++o)
    check_close(got[o], host_values(want[o]), want[o].shape(), tol.value_or(tolerance(got[o].dtype())),
                what + " output " + std::to_string(o));
  return {std::move(args), std::move(got)};
}

// f applied to each row of `row` consecutive values of x (row-major order), in double: the
// reference loops of the passes' row ops.
inline std::vector<double> along_rows(const std::vector<double>& x, int64_t row,
                                      const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (size_t o = 0; o < x.size(); o += size_t(row)) {
    std::vector<double> r = f(std::vector<double>(x.begin() + long(o), x.begin() + long(o) + row));
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

}  // namespace kiln::test
