// `kiln explain NAME [--dump DIR]`: what compile() captures for a zoo model or an example: its
// graphs, graph breaks with their lines, and guards. --dump DIR also writes each graph there
// (text and Graphviz dot), as KILN_DEBUG_DIR does; for a zoo model it then compiles it on the
// halide backend (KILN_CACHE=0, so nothing is skipped) and writes, per graph, the fusion plan and,
// per region, kiln's schedule as C++ source, Halide's stmt and stmt_html and the assembly.
#include <cstdio>

#include "bench/commands.h"
#include "bench/zoo.h"
#include "schedules/disk_cache.h"
#include "examples/branchy_model.h"
#include "examples/dynamic_shapes_demo.h"

namespace kiln::bench {

namespace {

const std::vector<std::string> kExamples = {"graph_break", "graph_break_where", "dynamic_shapes"};

ExplainReport explain_example(const std::string& name) {
  if (name == "dynamic_shapes") {
    examples::DynamicShapesModel model;
    std::printf("feeding batches of changing size:\n");
    examples::run_dynamic_shapes_demo(model);
    std::printf("\nthe dynamic graph (batch dim marked dynamic):\n");
    Tensor x = randn({16, 64});
    mark_dynamic(x, 0);
    return explain(compile([&](const Tensor& t) { return model.forward(t); }, {.name = name}), x);
  }
  static examples::BranchyModel model;
  Tensor x = randn({8, 16});
  if (name == "graph_break")
    return explain(compile([&](const Tensor& t) { return model.forward_with_break(t); }, {.name = name}), x);
  return explain(compile([&](const Tensor& t) { return model.forward_with_where(t); }, {.name = name}), x);
}

}  // namespace

std::vector<std::string> explain_names() {
  std::vector<std::string> names = zoo::zoo_names();
  names.insert(names.end(), kExamples.begin(), kExamples.end());
  return names;
}

int run_explain(const std::string& name, const std::string& dump_dir) {
  manual_seed(0);
  if (!dump_dir.empty()) set_debug_dir(dump_dir);
  ExplainReport r;
  if (std::find(kExamples.begin(), kExamples.end(), name) != kExamples.end()) {
    r = explain_example(name);
  } else {
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench);
    std::printf("%s: %s\n", m.name.c_str(), m.description.c_str());
    NoGradGuard no_grad;
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.name = name});
    r = explain(f, m.make_inputs());
    if (!dump_dir.empty()) {
      set_disk_cache_enabled(false);
      zoo::ZooFunction compiled = zoo::compile_zoo_model(m, {.backend = "halide", .name = name});
      compiled(m.make_inputs());
    }
  }
  std::printf("%s", r.text().c_str());
  if (!dump_dir.empty()) std::printf("graphs, fusion plans and regions written to %s\n", dump_dir.c_str());
  return 0;
}

}  // namespace kiln::bench
