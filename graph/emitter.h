// Emitter: appends primitive ops to a graph being rebuilt (a GraphRewrite's `out`), for the
// passes that replace one node by several (graph/decompose.cpp, graph/split_long_reductions.cpp).
// Constants are 0-d `full` nodes in the `compute` dtype, on `device`.
#pragma once
#include <string>
#include <vector>

#include "dsl/op_def.h"
#include "graph/graph.h"

namespace kiln {

struct Emitter {
  Graph& g;
  Device device;
  DType compute = DType::f32;

  int op(const char* name, const std::vector<int>& ins, const Attrs& a = {}) {
    return g.add_inferred_node(op_def(name), a, ins)[0];
  }
  int constant(double v) {
    Attrs a{{"shape", Shape{}}, {"value", v}, {"dtype", std::string(kiln::name(compute))}, {"device", device.str()}};
    return op("full", {}, a);
  }
  int cast(int x, DType t) {
    return g.values[size_t(x)].meta.dtype == t ? x : op("cast", {x}, {{"dtype", std::string(kiln::name(t))}});
  }
  int reduce(const char* name, int x, const std::vector<int64_t>& dims, bool keepdim = true) {
    return op(name, {x}, {{"dims", dims}, {"keepdim", keepdim}});
  }
  int view(int x, const Shape& shape) { return op("view", {x}, {{"shape", shape}}); }
};

}  // namespace kiln
