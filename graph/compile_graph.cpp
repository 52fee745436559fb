#include "graph/compile_graph.h"

#include <cctype>

#include "graph/autograd_function.h"
#include "graph/logs.h"
#include "graph/partition.h"
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

// A graph without ops (a backward that only passes tangents on) needs no pipeline.
std::shared_ptr<CompiledGraph> compile_half(std::shared_ptr<Graph> g, Backend& backend, const BackendOptions& options,
                                            const std::string& label) {
  BackendOptions labelled = options;
  labelled.label = file_name(label);
  return (g->nodes.empty() ? kiln::backend("eager") : backend).compile(std::move(g), labelled);
}

}  // namespace

std::shared_ptr<CompiledGraph> compile_graph(const Graph& captured, Backend& chosen, const BackendOptions& options,
                                             const std::string& label) {
  if (chosen.takes_captured_graphs()) return chosen.compile(std::make_shared<Graph>(captured), options);
  // A graph that autograd must record and that carries no backward of its own runs op by op.
  bool fallback = captured.needs_autograd() && !captured.joint && !chosen.supports_autograd();
  Backend& backend = fallback ? kiln::backend("eager") : chosen;
  if (fallback)
    log_line(LogChannel::graph, label + ": inputs require grad and the graph has no backward: the " +
                                    std::string(chosen.name()) + " backend does not record autograd, so it runs on \"eager\"");
  log_line(LogChannel::graph, label + ": captured " + std::to_string(captured.op_count()) + " ops\n" + captured.text());
  debug_dump(file_name(label) + ".captured", "txt", captured.text());
  debug_dump(file_name(label) + ".captured", "dot", captured.dot());

  auto g = std::make_shared<Graph>(captured);
  // Frozen: the trace goes on refining its symbols (later size reads specialize them), and a
  // compiled graph must keep meaning what it meant when it was compiled.
  g->shape_env = std::make_shared<ShapeEnv>(*captured.shape_env);
  after(label, "dead code", eliminate_dead_code(*g), *g);
  after(label, "common subexpressions", eliminate_common_subexpressions(*g), *g);
  after(label, "cuBLAS GEMM operands", cublas_gemm_operands(*g), *g);  // before folding: K^T's copy is K's
  after(label, "view folding", fold_views(*g), *g);
  after(label, "transposed matmuls", transpose_matmuls(*g), *g);
  std::vector<std::string> attentions;
  after(label, "fused attention", fuse_attention(*g, &attentions), *g);
  for (const std::string& a : attentions) log_line(LogChannel::graph, label + ": fused attention: " + a);
  after(label, "padded cat sums", merge_padded_cat_sums(*g), *g);
  after(label, "decompositions", decompose(*g, backend.decompositions()), *g);
  after(label, "split long reductions", backend.fuses_ops() ? split_long_reductions(*g) : 0, *g);
  // Not where autograd records the graph's ops (inputs require grad, no backward of its own):
  // matmul_bias has no derivative rule.
  bool recorded = captured.needs_autograd() && !captured.joint;
  after(label, "cuBLAS bias epilogues", recorded ? 0 : cublas_bias_epilogue(*g), *g);
  after(label, "common subexpressions", eliminate_common_subexpressions(*g), *g);
  after(label, "dead code", eliminate_dead_code(*g), *g);

  log_line(LogChannel::graph, label + ": optimized, " + std::to_string(g->op_count()) + " ops\n" + g->text());
  debug_dump(file_name(label) + ".optimized", "txt", g->text());
  debug_dump(file_name(label) + ".optimized", "dot", g->dot());
  if (!g->joint) return compile_half(g, backend, options, label);

  Partition p = partition_joint(*g);
  if (log_enabled(LogChannel::partition))
    log_line(LogChannel::partition, label + ": " + p.describe() + "; the eager tape would keep " +
                                        std::to_string(eager_tape_bytes(captured)) + " bytes");
  if (log_enabled(LogChannel::graph))
    log_line(LogChannel::graph, label + " forward:\n" + p.forward->text() + label + " backward:\n" + p.backward->text());
  debug_dump(file_name(label) + ".forward", "txt", p.forward->text());
  debug_dump(file_name(label) + ".backward", "txt", p.backward->text());
  std::shared_ptr<CompiledGraph> forward = compile_half(p.forward, backend, options, label + " forward");
  std::shared_ptr<CompiledGraph> backward = compile_half(p.backward, backend, options, label + " backward");
  return make_autograd_function(*g, p, std::move(forward), std::move(backward));
}

}  // namespace kiln
