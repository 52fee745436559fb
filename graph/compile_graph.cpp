#include "graph/compile_graph.h"

#include <cctype>

#include "graph/logs.h"
#include "graph/passes.h"

namespace kiln {

namespace {

std::string file_name(const std::string& label) {
  std::string out = label;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return out;
}

void after(const std::string& label, const char* step, int changed, const Graph& g) {
  if (!log_enabled(LogChannel::graph)) return;
  log_line(LogChannel::graph, label + ": " + step + ": " + std::to_string(changed) + " changed, " +
                                  std::to_string(g.op_count()) + " ops");
}

}  // namespace

std::shared_ptr<CompiledGraph> compile_graph(const Graph& captured, Backend& chosen, const BackendOptions& options,
                                             const std::string& label) {
  // Until compiled graphs carry their own backward, one that autograd must record runs op by op.
  Backend& backend = captured.needs_autograd() && !chosen.supports_autograd() ? kiln::backend("eager") : chosen;
  if (&backend != &chosen)
    log_line(LogChannel::graph, label + ": inputs require grad: the " + std::string(chosen.name()) +
                                    " backend does not record autograd yet, so this graph runs on \"eager\"");
  log_line(LogChannel::graph, label + ": captured " + std::to_string(captured.op_count()) + " ops\n" + captured.text());
  debug_dump(file_name(label) + ".captured", "txt", captured.text());
  debug_dump(file_name(label) + ".captured", "dot", captured.dot());

  auto g = std::make_shared<Graph>(captured);
  // Frozen: the trace goes on refining its symbols (later size reads specialize them), and a
  // compiled graph must keep meaning what it meant when it was compiled.
  g->shape_env = std::make_shared<ShapeEnv>(*captured.shape_env);
  after(label, "dead code", eliminate_dead_code(*g), *g);
  after(label, "common subexpressions", eliminate_common_subexpressions(*g), *g);
  after(label, "view folding", fold_views(*g), *g);
  after(label, "decompositions", decompose(*g, backend.decompositions()), *g);
  after(label, "dead code", eliminate_dead_code(*g), *g);

  log_line(LogChannel::graph, label + ": optimized, " + std::to_string(g->op_count()) + " ops\n" + g->text());
  debug_dump(file_name(label) + ".optimized", "txt", g->text());
  debug_dump(file_name(label) + ".optimized", "dot", g->dot());
  BackendOptions labelled = options;
  labelled.label = file_name(label);
  return backend.compile(g, labelled);
}

}  // namespace kiln
