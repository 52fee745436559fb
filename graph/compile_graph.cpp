#include "graph/compile_graph.h"

#include <cctype>

#include "dsl/profiler.h"
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

// One graph pass as a step of the list: its time a profiler phase, its effect a graph log line.
template <class Pass>
int step(const std::string& label, const char* name, const Graph& g, Pass&& pass) {
  int changed = 0;
  {
    CompilePhase phase(name, "\"graph\": " + json_quote(label));
    changed = pass();
  }
  if (log_enabled(LogChannel::graph))
    log_line(LogChannel::graph, label + ": " + name + ": " + std::to_string(changed) + " changed, " +
                                    std::to_string(g.op_count()) + " ops");
  return changed;
}

// The backend's own rewrites as steps of the list, then its compile. A graph without ops (a
// backward that only passes tangents on) needs no pipeline.
std::shared_ptr<CompiledGraph> compile_half(std::shared_ptr<Graph> g, Backend& backend, const BackendOptions& options,
                                            const std::string& label) {
  BackendOptions labelled = options;
  labelled.label = file_name(label);
  if (g->nodes.empty()) return kiln::backend("eager").compile(std::move(g), labelled);
  for (const Backend::GraphRewrite& r : backend.graph_rewrites())
    if (int changed = step(label, r.name, *g, [&] { return r.pass(*g); }))
      labelled.rewrites.push_back(std::string(r.name) + ": " + std::to_string(changed) + " changed");
  return backend.compile(std::move(g), labelled);
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
  step(label, "dead code", *g, [&] { return eliminate_dead_code(*g); });
  step(label, "common subexpressions", *g, [&] { return eliminate_common_subexpressions(*g); });
  step(label, "cuBLAS GEMM operands", *g, [&] { return cublas_gemm_operands(*g); });  // before folding: K^T's copy is K's
  step(label, "view folding", *g, [&] { return fold_views(*g); });
  step(label, "transposed matmuls", *g, [&] { return transpose_matmuls(*g); });
  std::vector<std::string> attentions;
  step(label, "fused attention", *g, [&] { return fuse_attention(*g, &attentions); });
  for (const std::string& a : attentions) log_line(LogChannel::graph, label + ": fused attention: " + a);
  step(label, "attention heads merged", *g, [&] { return merge_attention_heads(*g); });
  step(label, "padded cat sums", *g, [&] { return merge_padded_cat_sums(*g); });
  step(label, "decompositions", *g, [&] { return decompose(*g, backend.decompositions()); });
  step(label, "split long reductions", *g, [&] { return backend.fuses_ops() ? split_long_reductions(*g) : 0; });
  // Not where autograd records the graph's ops (inputs require grad, no backward of its own):
  // matmul_bias has no derivative rule.
  bool recorded = captured.needs_autograd() && !captured.joint;
  // What each epilogue pass folded into a cuBLASLt GEMM and what it kept apart, and why: part of
  // the fusion plan (KILN_LOGS=fusion).
  std::vector<std::string> epilogues;
  std::vector<std::string>* notes = log_enabled(LogChannel::fusion) ? &epilogues : nullptr;
  step(label, "cuBLAS bias epilogues", *g, [&] { return recorded ? 0 : cublas_bias_epilogue(*g, notes, backend.fuses_ops()); });
  step(label, "cuBLAS GELU epilogues", *g, [&] { return recorded ? 0 : cublas_gelu_epilogues(*g, notes); });
  step(label, "cuBLAS bias-gradient epilogues", *g, [&] { return recorded ? 0 : cublas_bias_grad_epilogues(*g, notes); });
  for (const std::string& e : epilogues) log_line(LogChannel::fusion, label + ": cuBLAS epilogue: " + e);
  step(label, "common subexpressions", *g, [&] { return eliminate_common_subexpressions(*g); });
  step(label, "dead code", *g, [&] { return eliminate_dead_code(*g); });

  log_line(LogChannel::graph, label + ": optimized, " + std::to_string(g->op_count()) + " ops\n" + g->text());
  debug_dump(file_name(label) + ".optimized", "txt", g->text());
  debug_dump(file_name(label) + ".optimized", "dot", g->dot());
  if (!g->joint) return compile_half(g, backend, options, label);

  Partition p;
  {
    CompilePhase phase("partition");
    p = partition_joint(*g);
  }
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
