#include "schedules/lowerable.h"

#include <algorithm>

#include "dsl/index_checks.h"
#include "schedules/weight_packing.h"

namespace kiln {

bool is_pointwise(const GraphNode& n) { return bool(n.op->pointwise); }

bool is_elementwise(const GraphNode& n) { return is_pointwise(n) && n.op->schedule_class == ScheduleClass::pointwise; }

bool is_cheap_pointwise(const GraphNode& n) { return is_pointwise(n) && n.op->cheap; }

constexpr int64_t kGemmMaxABytes = 1 << 20, kGemmMaxRows = 256;

bool gemm_lowerable(const Graph& g, const GraphNode& n) {
  if (!n.op->gemm || !packs_weight(g, n)) return false;
  const Value& a = g.values[size_t(n.inputs[0])];
  const Value& b = g.values[size_t(n.inputs[1])];
  const Value& out = g.values[size_t(n.outputs[0])];
  if (a.meta.dtype != DType::f32 || b.meta.dtype != DType::f32 || out.meta.dtype != DType::f32) return false;
  // Batched a ([B, T, C] in a transformer) measured slower than the eager GEMM, which folds the
  // batch into M (tiny_gpt: a 14-op region with three GEMMs took 0.79 ms against 0.55 eager).
  if (a.meta.shape.size() != 2 || !b.sym[0].is_static() || !b.sym[1].is_static() || b.meta.shape[1] < kGemmPanel)
    return false;
  // Each task streams one panel of b against all of a: a must stay in L2, and the panel must be
  // worth streaming (few rows: the weight-bound regime of a small batch). Measured with its bias
  // and GELU epilogue against eager, ms: 64x1024x512 0.18 / 0.44, 64x1024x1024 0.33 / 0.61;
  // 256x512x384 0.33 / 0.36; 512x256x256 0.26 / 0.21, 1024x64x256 0.41 / 0.20, and the
  // transformer block's 1024x512x2048 1.3x slower. Those go to the eager GEMM (256-row chunks).
  if (numel(a.meta.shape) * 4 > kGemmMaxABytes || a.meta.shape[0] > kGemmMaxRows) return false;
  int readers = 0;
  for (const GraphNode& other : g.nodes)
    for (int v : other.inputs) readers += v == n.inputs[1];
  for (int v : g.outputs) readers += v == n.inputs[1];
  return readers == 1;
}

namespace {

// Whether value v, or a view of it, is read by a node that a pipeline may also compute (anything
// but gathers and GEMMs, which run through cuBLAS on CUDA).
bool read_by_pipeline_ops(const Graph& g, int v) {
  for (const GraphNode& r : g.nodes) {
    if (std::find(r.inputs.begin(), r.inputs.end(), v) == r.inputs.end()) continue;
    if (r.op->schedule_class == ScheduleClass::gather || r.op->gemm) continue;
    if (r.op->schedule_class != ScheduleClass::view || r.outputs.size() != 1) return true;
    if (read_by_pipeline_ops(g, r.outputs[0])) return true;
  }
  return false;
}

}  // namespace

bool clamped_gather(const Graph& g, const GraphNode& n) {
  return n.op->schedule_class == ScheduleClass::gather && !indices_checked_on_host(g.values[size_t(n.outputs.at(0))].meta.device) &&
         !read_by_pipeline_ops(g, n.inputs.at(0));
}

bool lowerable(const Graph& g, const GraphNode& n) {
  const OpDef& op = *n.op;
  if (op.gemm && !gemm_lowerable(g, n)) return false;  // the eager GEMM
  if (op.random) return false;  // eager kernels: the same generator as eager mode
  if (op.host_checked && !clamped_gather(g, n)) return false;
  if (n.outputs.size() != 1) return false;
  for (int v : n.outputs)
    for (const SymDim& d : g.values[v].sym)
      if (g.shape_env->canonical(d).opaque) return false;
  for (int v : n.inputs)
    for (const SymDim& d : g.values[v].sym)
      if (g.shape_env->canonical(d).opaque) return false;
  if (is_pointwise(n) || op.schedule_class == ScheduleClass::view || op.gemm) return true;
  return bool(op.define);
}

}  // namespace kiln
