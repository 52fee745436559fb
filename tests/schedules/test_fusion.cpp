// Fusion plans (schedules/fusion.h): long runs of independent update chains (an optimizer's
// parameters) split into several pipelines, each chain whole: no pipeline reads a full-size value
// that another pipeline made, wherever the split lands.
#include "schedules/fusion.h"

#include <set>

#include "dsl/op_def.h"
#include "graph/sym_shape.h"
#include "support/reference.h"

using namespace kiln;

namespace {

struct Builder {
  Graph g;
  int input(const Shape& s) {
    return g.add_input(InputKind::argument, int(g.inputs.size()), "arg" + std::to_string(g.inputs.size()),
                       {s, DType::f32, Device::cpu()}, static_shape(s), contiguous_strides(s));
  }
  int op(const char* name, const std::vector<int>& ins) { return g.add_inferred_node(op_def(name), {}, ins)[0]; }
  int scalar(double v) {
    return g.add_inferred_node(op_def("full"), {{"shape", Shape{}}, {"value", v}, {"dtype", std::string("f32")},
                                                {"device", std::string("cpu")}},
                               {})[0];
  }
};

// `chains` momentum-like updates of (p, m) from g, each `length` ops or a little more, returned
// as the graph's outputs in order.
Graph update_chains(int chains, int length) {
  Builder b;
  int lr = b.scalar(0.01), beta = b.scalar(0.9);
  for (int c = 0; c < chains; ++c) {
    int p = b.input({64, 48}), m = b.input({64, 48}), grad = b.input({64, 48});
    int decayed = b.op("mul", {p, beta});  // the chain's first op reads only inputs
    int v = b.op("add", {b.op("mul", {m, beta}), grad});
    int new_m = v;
    for (int k = 0; k < length; ++k) v = b.op(k % 2 ? "mul" : "add", {v, k % 3 ? lr : new_m});
    b.g.outputs.push_back(new_m);
    b.g.outputs.push_back(b.op("sub", {decayed, v}));
  }
  return std::move(b.g);
}

}  // namespace

BOOST_AUTO_TEST_CASE(independent_chains_split_only_where_their_values_are_dead) {
  for (int length = 3; length <= 30; ++length) {
    Graph g = update_chains(6, length);
    std::vector<PlannedStep> plan = plan_fusion(g);
    std::set<int> inputs;
    for (const GraphInput& in : g.inputs) inputs.insert(in.value);
    int regions = 0;
    for (const PlannedStep& s : plan) {
      if (s.node >= 0) continue;
      ++regions;
      for (int v : s.region.inputs) {
        bool whole = inputs.count(v) || numel(g.values[size_t(v)].meta.shape) <= 1;
        BOOST_TEST(whole, "chains of " << length << ": region " << regions - 1 << " reads %" << v
                                         << ", made by another region\n" << fusion_text(g, plan));
      }
    }
    // More than one pipeline once the chains pass the split size, and never one per op.
    int ops = 6 * (length + 4);
    BOOST_TEST((ops <= 32 || regions > 1), "chains of " << length << ": " << regions << " regions");
    BOOST_TEST(regions <= 6, "chains of " << length << ": " << regions << " regions");
  }
}
