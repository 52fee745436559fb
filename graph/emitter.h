// Emitter: appends primitive ops to a graph being rebuilt (a GraphRewrite's `out`), for the
// passes that replace one node by several (graph/decompose.cpp, graph/split_long_reductions.cpp).
// Constants are 0-d `full` nodes in the `compute` dtype, on `device`. Emitted wraps its values for
// the composite math of dsl/composite_math.h.
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

// A value of the graph an Emitter builds, with the Tensor API's operators and functions, so that
// composite math written once as a template (dsl/composite_math.h) emits its nodes here.
struct Emitted {
  Emitter* e;
  int v;
};

inline Emitted binary(const char* name, Emitted a, Emitted b) { return {a.e, a.e->op(name, {a.v, b.v})}; }
inline Emitted operator+(Emitted a, Emitted b) { return binary("add", a, b); }
inline Emitted operator-(Emitted a, Emitted b) { return binary("sub", a, b); }
inline Emitted operator*(Emitted a, Emitted b) { return binary("mul", a, b); }
inline Emitted operator+(Emitted a, double c) { return a + Emitted{a.e, a.e->constant(c)}; }
inline Emitted mean(Emitted x, const std::vector<int64_t>& dims, bool keepdim) {
  return {x.e, x.e->reduce("mean", x.v, dims, keepdim)};
}
inline Emitted square(Emitted x) { return {x.e, x.e->op("square", {x.v})}; }
inline Emitted rsqrt(Emitted x) { return {x.e, x.e->op("rsqrt", {x.v})}; }

}  // namespace kiln
