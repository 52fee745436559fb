// Graphs as text (graph/graph_file.h): every graph the compile path hands a backend (zoo models
// with a dynamic batch, the halves of a joint graph, a whole compiled training step with its
// in-place writes) reads back into the same graph, and attribute values of every type survive
// exactly. Malformed text gives kiln::Error naming the line.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "bench/train_step.h"
#include "bench/zoo.h"
#include "dsl/optim/optimizer.h"
#include "graph/backend.h"
#include "graph/graph_file.h"
#include "support/graph_builder.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Keeps every graph it is given (after the compile path's passes and partition) and runs it op by op.
class KeepGraphs final : public Backend {
 public:
  std::string_view name() const override { return "keep_graphs"; }
  bool fuses_ops() const override { return true; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    graphs.push_back(g);
    return backend("eager").compile(std::move(g), o);
  }
  static inline std::vector<std::shared_ptr<const Graph>> graphs;
};

void use_keep_graphs() {
  static bool done = [] {
    register_backend(std::make_shared<KeepGraphs>());
    return true;
  }();
  (void)done;
  KeepGraphs::graphs.clear();
}

// The graph read back from its text: the same text, structure, symbols and flags.
void check_round_trip(const Graph& g, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    std::string text = write_graph(g);
    Graph back = read_graph(text);
    BOOST_TEST(write_graph(back) == text);
    BOOST_TEST(back.structural_hash() == g.structural_hash());
    BOOST_TEST(back.text() == g.text());
    BOOST_TEST(back.shape_env->symbol_count() == g.shape_env->symbol_count());
    BOOST_TEST(back.writes == g.writes);
    BOOST_TEST(back.joint.has_value() == g.joint.has_value());
    BOOST_TEST(back.backward_traced == g.backward_traced);
    BOOST_TEST(back.trains == g.trains);
    for (size_t v = 0; v < g.values.size(); ++v) {
      BOOST_TEST(back.shape_env->canonical(back.values[v].sym) == g.shape_env->canonical(g.values[v].sym));
      BOOST_TEST(back.values[v].strides == g.values[v].strides);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(zoo_graphs_with_a_dynamic_batch_read_back_the_same) {
  use_keep_graphs();
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::test)) {
    manual_seed(3);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
    auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); }, {.backend = "keep_graphs", .dynamic = true});
    f(m.make_inputs());
  }
  BOOST_TEST_REQUIRE(KeepGraphs::graphs.size() >= zoo::zoo_names(zoo::ZooSize::test).size());
  int symbolic = 0, halves = 0;
  for (const auto& g : KeepGraphs::graphs) {
    symbolic += g->shape_env->symbol_count() > 0;
    halves += std::any_of(g->inputs.begin(), g->inputs.end(), [](const GraphInput& in) { return in.kind == InputKind::saved; });
    check_round_trip(*g, g->text().substr(0, 200));
  }
  BOOST_TEST(symbolic > 0);  // dynamic dims were captured as symbols
  BOOST_TEST(halves > 0);    // the parameters require grad: forward and backward halves
}

BOOST_AUTO_TEST_CASE(a_compiled_training_step_reads_back_the_same) {
  use_keep_graphs();
  manual_seed(4);
  zoo::ZooModel m = zoo::make_zoo_model("tiny_gpt", zoo::ZooSize::test);
  optim::AdamW opt(m.module->parameters(), {.lr = 1e-3});
  auto step = compile([&](std::vector<Tensor> xs) { return TensorList{bench::train_step(m, opt, xs)}; },
                      {.backend = "keep_graphs"});
  step(m.make_inputs());
  BOOST_TEST_REQUIRE(!KeepGraphs::graphs.empty());
  bool whole_step = false;
  for (const auto& g : KeepGraphs::graphs) {
    whole_step |= g->backward_traced && !g->writes.empty();
    check_round_trip(*g, "train step graph");
  }
  BOOST_TEST(whole_step);  // the backward and the optimizer's in-place updates inside one graph
}

BOOST_AUTO_TEST_CASE(attributes_of_every_type_survive_exactly) {
  Builder b;
  int x = b.input({3, 4});
  const double tricky[] = {0.1, -1e-300, 1.0 / 3.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::denorm_min()};
  for (double v : tricky) x = b.op("mul", {x}, {{"scalar", v}});
  int y = b.op("sum", {x}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}});
  int z = b.op("gelu", {y}, {{"approximate", std::string("tanh")}});
  b.g.nodes.back().attrs.set("note", std::string("\"quoted\"\n\\ \t"));  // read by nothing: any string
  b.g.outputs = {z};
  Graph back = read_graph(write_graph(b.g));
  BOOST_TEST_REQUIRE(back.nodes.size() == b.g.nodes.size());
  for (size_t i = 0; i < std::size(tricky); ++i) {
    double got = back.nodes[i].attrs.get<double>("scalar");
    BOOST_TEST(std::memcmp(&got, &tricky[i], sizeof got) == 0, "scalar " << tricky[i] << " read back as " << got);
  }
  BOOST_TEST(back.nodes[5].attrs.get<std::vector<int64_t>>("dims") == std::vector<int64_t>{-1});
  BOOST_TEST(back.nodes[5].attrs.get<bool>("keepdim"));
  BOOST_TEST(back.nodes[6].attrs.get<std::string>("approximate") == "tanh");
  BOOST_TEST(back.nodes[6].attrs.get<std::string>("note") == "\"quoted\"\n\\ \t");
}

BOOST_AUTO_TEST_CASE(malformed_text_names_the_line) {
  Builder b;
  int x = b.input({2, 2});
  b.g.outputs = {b.op("exp", {x})};
  std::string good = write_graph(b.g);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    size_t at = t.find(from);
    BOOST_TEST_REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  check_error([&] { read_graph("not a graph\n"); }, {"line 1", "kiln-graph 1"});
  check_error([&] { read_graph(replaced("kiln-graph 1", "kiln-graph 9")); }, {"line 1", "version 9"});
  check_error([&] { read_graph(replaced("node exp", "node no_such_op")); }, {"line 5", "no_such_op"});
  check_error([&] { read_graph(replaced("[0] [1]", "[0] [7]")); }, {"line 5", "id 7 out of range"});
  check_error([&] { read_graph(replaced("value f32", "value f33")); }, {"line 2", "f33"});
  check_error([&] { read_graph(replaced("end\n", "")); }, {"ends before 'end'"});
  check_error([&] { read_graph(replaced("outputs", "output")); }, {"line 6", "unknown record 'output'"});
}
