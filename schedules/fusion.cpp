#include "schedules/fusion.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "schedules/kept_outputs.h"
#include "schedules/lower_region.h"

namespace kiln {

std::vector<int> step_of_nodes(const Graph& g, const std::vector<PlannedStep>& steps) {
  std::vector<int> step_of(g.nodes.size(), -1);
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].node >= 0) step_of[size_t(steps[si].node)] = int(si);
    for (int n : steps[si].region.nodes) step_of[size_t(n)] = int(si);
  }
  return step_of;
}

namespace {

// Why a node is not lowered into a pipeline ("" when it is).
std::string not_lowered_reason(const Graph& g, const GraphNode& n, const std::set<int>& known_symbols) {
  if (!lowerable(g, n)) {
    const OpDef& op = *n.op;
    if (op.random) return "random draws run eagerly (the same generator as eager mode)";
    if (op.collective) return "a collective runs as a step of its own (it talks to the other ranks)";
    if (op.custom && !op.define && !op.pointwise) return "a custom op runs its own kernel";
    if (op.gemm)
      return "matmul runs as an eager GEMM kernel (a pipeline's GEMM needs f32, a weight read transposed and "
             "a 2-D input of at most 256 rows)";
    if (op.schedule_class == ScheduleClass::matmul) {  // products that are not GEMMs: attention
      const Value& q = g.values[size_t(n.inputs[0])];
      if (!q.meta.device.is_cuda())
        return "attention runs as its fused eager kernel (query blocks per batch and head; no [T, T] scores in memory)";
      return q.meta.dtype == DType::f32
                 ? "attention runs as its eager kernel (cuBLAS products around one softmax kernel; no [T, T] scores kept)"
                 : "attention runs as cuDNN's fused flash attention (no [T, T] scores in memory)";
    }
    if (op.host_checked && !clamped_gather(g, n)) return "its indices are checked on the host before any read";
    if (n.outputs.size() != 1) return "it has several outputs";
    return "a dim has no product formula, or the op has no Halide definition";
  }
  // An empty result (a zero-length slice's zeros) has nothing to compute; as a pipeline output a
  // GPU schedule would still index it.
  for (int v : n.outputs)
    if (numel(g.values[size_t(v)].meta.shape) == 0) return "its result is empty";
  // A pipeline's symbols are read off the graph's inputs at run time: only those that are a
  // whole dim of some input can be known (a carried [s0*s1] alone does not give s0).
  std::vector<int> vs = n.inputs;
  vs.insert(vs.end(), n.outputs.begin(), n.outputs.end());
  for (int v : vs)
    for (const SymDim& d : g.values[size_t(v)].sym)
      for (int s : g.shape_env->canonical(d).syms)
        if (!known_symbols.count(s)) return "symbol s" + std::to_string(s) + " is not a dim of any input";
  return "";
}

// Which nodes go into pipelines, with the reason for each that does not. A view joins one only
// when every reader of it is in a pipeline too; a view read by an eager kernel (a transposed
// weight into matmul) or returned stays a view, so no pipeline copies it.
std::vector<std::string> cut_reasons(const Graph& g) {
  std::set<int> known;
  for (const GraphInput& in : g.inputs)
    for (const SymDim& d : g.values[size_t(in.value)].sym) {
      SymDim c = g.shape_env->canonical(d);
      if (!c.opaque && c.coeff == 1 && c.syms.size() == 1) known.insert(c.syms[0]);
    }
  std::vector<std::string> reason(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) reason[i] = not_lowered_reason(g, g.nodes[i], known);
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const GraphNode& n = g.nodes[i];
    if (!reason[i].empty() || n.op->schedule_class != ScheduleClass::view) continue;
    int v = n.outputs[0];
    if (outputs.count(v)) reason[i] = "a returned view stays a view of its input";
    for (int r : readers[size_t(v)])
      if (reason[size_t(r)].empty() && g.nodes[size_t(r)].op->gemm &&
          g.nodes[size_t(r)].inputs[1] == v)
        reason[i] = "the weight view is packed into panels for the GEMM (once per version)";
    for (int r : readers[size_t(v)])
      if (!reason[size_t(r)].empty())
        reason[i] = "a view read by eager " + g.nodes[size_t(r)].op->name + " stays a view (no copy)";
  }
  return reason;
}

// A region past this many ops ends where none of its values (0-d ones aside) is read any more:
// independent chains, like an optimizer's update of each parameter, become pipelines of their own.
// Halide's compile time grows faster than the pipeline (a training step's 476-op update of 26
// parameters took 68 s; as one region per parameter, seconds in all). Ending it only where its
// values are dead keeps a chain whole: cut before a node that merely reads none of them (the
// first op of the next parameter's update), the ops after it would read a value of the region
// from memory (a parameter-sized intermediate written and read back).
constexpr size_t kIndependentSplitOps = 32;
// Past this many ops a region ends before any node that reads none of its values, dead or not,
// so that no region grows without bound.
constexpr size_t kMaxRegionOps = 128;

bool reads_region(const Graph& g, const GraphNode& n, const std::set<int>& made) {
  for (int v : n.inputs)
    if (made.count(v) && numel(g.values[size_t(v)].meta.shape) > 1) return true;
  return false;
}

// A value that one region makes and later regions read is stored by its maker and loaded by its
// readers. Where it is one cheap op (is_cheap_pointwise) of one value of its own size that is
// stored anyway (a graph input or another step's result, such as a GEMM's output, or a view of
// one), no wider than it, and of small operands (a bias), each reading region computes it again
// from those instead (with the views): the loads are the same bytes or fewer, and the maker no
// longer writes it. A train step's `mm + b` before GELU is read by
// GELU and by GELU's derivative far later: recomputed there, the forward pipeline writes one
// [4, 256, 2048] tensor instead of two. Under bf16 autocast the cross-entropy's f32 cast of the
// [8192, 50304] bf16 logits is read by the loss and its gradient: each reads the bf16 logits.
void recompute_cheap_values(const Graph& g, std::vector<PlannedStep>& steps) {
  std::vector<int> step_of = step_of_nodes(g, steps);
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    int si = step_of[i];
    if (si < 0 || steps[size_t(si)].node >= 0 || !is_cheap_pointwise(n)) continue;
    int v = n.outputs[0];
    int64_t size = numel(g.values[size_t(v)].meta.shape);
    if (graph_outputs.count(v) || size < 2) continue;
    int full = 0;
    bool ok = true;
    std::vector<int> views;  // views made here between a stored value and n, recomputed with it
    for (int u : n.inputs) {
      // Through views of its own step (the logits' [8, 1024, 50304] -> [8192, 50304]) to the
      // value they show.
      int shown = u;
      std::vector<int> chain;
      for (int p = g.values[size_t(shown)].producer;
           p >= 0 && step_of[size_t(p)] == si && g.nodes[size_t(p)].op->schedule_class == ScheduleClass::view &&
           g.nodes[size_t(p)].inputs.size() == 1;
           p = g.values[size_t(shown)].producer) {
        chain.push_back(p);
        shown = g.nodes[size_t(p)].inputs[0];
      }
      const Value& in = g.values[size_t(u)];
      int64_t un = numel(in.meta.shape);
      const int shown_by = g.values[size_t(shown)].producer;
      bool stored = shown_by < 0 || step_of[size_t(shown_by)] != si;
      if (stored) views.insert(views.end(), chain.begin(), chain.end());
      // A narrowing cast (f32 -> bf16) would have its readers load the wider value instead.
      bool no_wider = itemsize(in.meta.dtype) <= itemsize(g.values[size_t(v)].meta.dtype);
      if (un == size && stored && no_wider) ++full;
      else if (un * 8 > size) ok = false;  // only small operands besides the one stored value
    }
    std::set<int> targets;
    for (int r : readers[size_t(v)]) {
      int rs = step_of[size_t(r)];
      if (rs == si) continue;
      if (rs < 0 || steps[size_t(rs)].node >= 0) ok = false;  // an eager kernel reads it: stored
      else targets.insert(rs);
    }
    if (!ok || full != 1 || targets.empty()) continue;
    views.push_back(int(i));
    for (int rs : targets) {
      std::vector<int>& nodes = steps[size_t(rs)].region.nodes;
      for (int k : views)
        if (auto at = std::lower_bound(nodes.begin(), nodes.end(), k); at == nodes.end() || *at != k) nodes.insert(at, k);
      steps[size_t(rs)].region.recomputed.push_back(v);
    }
  }
}

// Whether each node's value depends on no data at all: a creation op without inputs (arange, full;
// random draws run eagerly) or a view or cheap pointwise op of such values only. GPT-2's causal
// mask, ge(arange(T) unsqueezed, arange(T) unsqueezed), is one.
std::vector<char> index_only_nodes(const Graph& g) {
  std::vector<char> index_only(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.op->random || n.outputs.size() != 1) continue;
    bool made_from_indices = !n.inputs.empty() && std::all_of(n.inputs.begin(), n.inputs.end(), [&](int u) {
      int p = g.values[size_t(u)].producer;
      return p >= 0 && index_only[size_t(p)];
    });
    index_only[i] = n.op->schedule_class == ScheduleClass::creation
                        ? n.inputs.empty()
                        : made_from_indices && (n.op->schedule_class == ScheduleClass::view || is_cheap_pointwise(n));
  }
  return index_only;
}

// A value computed from indices alone (index_only_nodes) that one region makes and later regions
// read is computed again by each reader, with the whole chain that makes it: a few integer ops
// instead of a load. GPT-2's [T, T] causal mask, made once and read by the masked softmax of
// every layer (and by the gradient of its where), was loaded in each of the softmax's three
// passes over a row; computed in place it is never loaded (as in torch.compile's kernel). The
// maker then drops the chain if nothing else of its reads it.
void recompute_index_values(const Graph& g, std::vector<PlannedStep>& steps) {
  std::vector<char> index_only = index_only_nodes(g);
  std::vector<int> step_of = step_of_nodes(g, steps);
  std::vector<std::vector<int>> readers = readers_of(g);
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  auto has = [](const std::vector<int>& nodes, int n) { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); };
  // The nodes that make node i: i and its ancestors (all index-only too).
  auto chain_of = [&](int i) {
    std::set<int> chain{i};
    std::vector<int> todo{i};
    while (!todo.empty()) {
      int k = todo.back();
      todo.pop_back();
      for (int u : g.nodes[size_t(k)].inputs)
        if (int p = g.values[size_t(u)].producer; p >= 0 && chain.insert(p).second) todo.push_back(p);
    }
    return chain;
  };
  std::set<int> moved;  // chain nodes copied into readers: candidates to drop from their maker
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int si = step_of[i];
    if (si < 0 || steps[size_t(si)].node >= 0 || !index_only[i]) continue;
    int v = g.nodes[i].outputs[0];
    // Even a one-element constant (softmax's -inf fill): stored, it costs its maker a kernel on CUDA.
    if (graph_outputs.count(v)) continue;
    // Regions reading it recompute it; an eager kernel reading it still gets it stored.
    std::set<int> targets;
    for (int r : readers[size_t(v)])
      if (int rs = step_of[size_t(r)]; rs >= 0 && rs != si && steps[size_t(rs)].node < 0) targets.insert(rs);
    if (targets.empty()) continue;
    std::set<int> chain = chain_of(int(i));
    bool lowered = std::all_of(chain.begin(), chain.end(), [&](int k) {
      return step_of[size_t(k)] >= 0 && steps[size_t(step_of[size_t(k)])].node < 0;
    });
    if (!lowered) continue;  // part of it runs outside pipelines (an eager arange)
    for (int rs : targets) {
      Region& r = steps[size_t(rs)].region;
      if (has(r.nodes, int(i))) continue;
      for (int k : chain)
        if (!has(r.nodes, k)) r.nodes.insert(std::lower_bound(r.nodes.begin(), r.nodes.end(), k), k);
      r.recomputed.push_back(v);
    }
    moved.insert(chain.begin(), chain.end());
  }
  // Drop from each region the moved nodes nothing reads from it any more: no node of its own,
  // no graph output, no step that reads the value without computing it (an eager kernel, or a
  // region the chain was not copied into: a one-element constant of the chain that a later
  // region reads alone). Last first, so that a chain goes whole.
  std::vector<std::set<int>> steps_with(g.nodes.size());  // the steps that compute each node
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].node >= 0) steps_with[size_t(steps[si].node)].insert(int(si));
    for (int n : steps[si].region.nodes) steps_with[size_t(n)].insert(int(si));
  }
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].node >= 0) continue;
    std::vector<int>& nodes = steps[si].region.nodes;
    for (size_t k = nodes.size(); k-- > 0;) {
      int n = nodes[k];
      if (!moved.count(n)) continue;
      int v = g.nodes[size_t(n)].outputs[0];
      bool read = graph_outputs.count(v) > 0;
      for (int r : readers[size_t(v)])
        for (int t : steps_with[size_t(r)])
          if (t == int(si) || steps[size_t(t)].node >= 0 || !steps_with[size_t(n)].count(t)) read = true;
      if (read) continue;
      nodes.erase(nodes.begin() + std::ptrdiff_t(k));
      steps_with[size_t(n)].erase(int(si));
    }
  }
}

// A pointwise node whose inputs all exist once an earlier region has run, and that one of them
// comes from, moves into that region when nothing in its own region reads it: regions form in
// graph order, and a copy that comes after a GEMM joins the region after the GEMM even when it
// reads only what a region before it made. GPT-2's attention takes v as a view of the qkv
// projection (slice, heads, transpose) whose contiguous copy comes after the q k^T product: the
// projection's region stored the view (a copy), and the softmax's region copied it again; moved
// back, the projection's region writes v's copy once.
void hoist_into_source_regions(const Graph& g, std::vector<PlannedStep>& steps) {
  std::vector<int> step_of = step_of_nodes(g, steps);
  std::vector<std::vector<int>> readers = readers_of(g);
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].node >= 0) continue;
    std::vector<int>& nodes = steps[si].region.nodes;
    for (size_t k = nodes.size(); k-- > 0;) {
      const GraphNode& n = g.nodes[size_t(nodes[k])];
      if (!is_pointwise(n) || n.outputs.size() != 1) continue;
      int source = -1;  // the latest step that makes an input
      for (int u : n.inputs)
        if (int p = g.values[size_t(u)].producer; p >= 0) source = std::max(source, step_of[size_t(p)]);
      if (source < 0 || source >= int(si) || steps[size_t(source)].node >= 0) continue;
      const std::vector<int>& read_by = readers[size_t(n.outputs[0])];
      if (std::any_of(read_by.begin(), read_by.end(), [&](int r) { return step_of[size_t(r)] == int(si); })) continue;
      std::vector<int>& into = steps[size_t(source)].region.nodes;
      into.insert(std::lower_bound(into.begin(), into.end(), nodes[k]), nodes[k]);
      step_of[size_t(nodes[k])] = source;
      nodes.erase(nodes.begin() + std::ptrdiff_t(k));
    }
  }
}

}  // namespace

std::vector<PlannedStep> plan_fusion(const Graph& g) {
  std::vector<PlannedStep> steps;
  std::vector<std::string> reason = cut_reasons(g);
  int open = -1;        // the region being grown (always the last step)
  std::set<int> made;   // values it makes
  // The last node that reads each value, and the last node that reads a value of the open region.
  std::vector<size_t> last_reader(g.values.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs) last_reader[size_t(v)] = i;
  size_t reach = 0;
  // Views of the open region's values kept outside pipelines: they run after it, unless a node
  // of the region would read them (the region ends before that node).
  std::vector<int> deferred;
  std::set<int> deferred_values;
  auto close = [&] {
    open = -1;
    made.clear();
    reach = 0;
    for (int d : deferred) steps.push_back({d, {}, reason[size_t(d)]});
    deferred.clear();
    deferred_values.clear();
  };
  // Nodes that read parameters only (captured inputs, or such nodes' results), in graphs that keep
  // such regions' outputs between calls (kept_outputs.h): regions of their own, first, at most
  // kIndependentSplitOps nodes each, so that no activation joins them (autocast's weight casts
  // were traced beside the activations' casts and shared their regions).
  std::vector<bool> of_parameters(g.nodes.size(), false);
  if (graph_keeps_outputs(g)) {
    std::set<int> params, outputs(g.outputs.begin(), g.outputs.end());
    for (const GraphInput& in : g.inputs)
      if (in.kind == InputKind::captured) params.insert(in.value);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const GraphNode& n = g.nodes[i];
      if (!reason[i].empty() || n.inputs.empty()) continue;
      bool reads = std::all_of(n.inputs.begin(), n.inputs.end(), [&](int v) { return params.count(v) > 0; });
      bool returned = std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return outputs.count(v) > 0; });
      if (!reads || returned) continue;
      of_parameters[i] = true;
      params.insert(n.outputs.begin(), n.outputs.end());
      if (steps.empty() || steps.back().region.nodes.size() >= kIndependentSplitOps) steps.push_back({});
      steps.back().region.nodes.push_back(int(i));
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (of_parameters[i]) continue;
    const GraphNode& n = g.nodes[i];
    bool reads_deferred = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int v) { return deferred_values.count(v) > 0; });
    size_t ops = open >= 0 ? steps[size_t(open)].region.nodes.size() : 0;
    bool split = (ops >= kIndependentSplitOps && reach < i) || (ops >= kMaxRegionOps && !reads_region(g, n, made));
    if (reason[i].empty() && (reads_deferred || split)) close();
    if (reason[i].empty()) {
      if (open < 0) {
        steps.push_back({});
        open = int(steps.size()) - 1;
      }
      steps[size_t(open)].region.nodes.push_back(int(i));
      made.insert(n.outputs.begin(), n.outputs.end());
      for (int v : n.outputs)
        if (numel(g.values[size_t(v)].meta.shape) > 1) reach = std::max(reach, last_reader[size_t(v)]);
    } else if (open >= 0 && n.op->schedule_class == ScheduleClass::view && !made.count(n.inputs[0]) &&
               !deferred_values.count(n.inputs[0])) {
      // A view kept outside pipelines costs nothing and does not need the open region: it moves
      // before it, so the region goes on growing (attention's views of q, k and v between the
      // score and softmax ops would cut it otherwise).
      steps.insert(steps.begin() + open, {int(i), {}, reason[i]});
      ++open;
    } else if (open >= 0 && n.op->schedule_class == ScheduleClass::view) {
      // A view of the region's value (a GEMM operand's dense copy, flattened), or of such a view:
      // after the region.
      deferred.push_back(int(i));
      deferred_values.insert(n.outputs.begin(), n.outputs.end());
    } else {
      close();
      steps.push_back({int(i), {}, reason[i]});
    }
  }
  close();
  hoist_into_source_regions(g, steps);
  recompute_cheap_values(g, steps);
  recompute_index_values(g, steps);
  // Each region's inputs (values it reads but does not make) and outputs (values read later, by a
  // step that does not make them too, or returned).
  std::vector<int> last_use(g.values.size(), -1);
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<std::set<int>> makes(steps.size());
  for (size_t si = 0; si < steps.size(); ++si) {
    auto nodes = steps[si].node >= 0 ? std::vector<int>{steps[si].node} : steps[si].region.nodes;
    for (int n : nodes)
      for (int v : g.nodes[size_t(n)].outputs) makes[si].insert(v);
    for (int n : nodes)
      for (int v : g.nodes[size_t(n)].inputs)
        if (!makes[si].count(v)) last_use[size_t(v)] = int(si);
  }
  for (size_t si = 0; si < steps.size(); ++si) {
    Region& r = steps[si].region;
    if (steps[si].node >= 0) continue;
    for (int n : r.nodes)
      for (int v : g.nodes[size_t(n)].inputs)
        if (!makes[si].count(v) && std::find(r.inputs.begin(), r.inputs.end(), v) == r.inputs.end()) r.inputs.push_back(v);
    for (int v : makes[si])
      if (graph_outputs.count(v) || last_use[size_t(v)] > int(si)) r.outputs.push_back(v);
    for (int n : r.nodes)
      if (g.nodes[size_t(n)].op->gemm) r.packed.push_back(g.nodes[size_t(n)].inputs[1]);
    r.symbols = region_symbols(g, r);
  }
  // A region whose values nobody reads (only views of values used elsewhere) is dropped.
  steps.erase(std::remove_if(steps.begin(), steps.end(),
                             [](const PlannedStep& s) { return s.node < 0 && s.region.outputs.empty(); }),
              steps.end());
  return steps;
}

std::string fusion_text(const Graph& g, const std::vector<PlannedStep>& steps) {
  std::ostringstream os;
  int regions = 0;
  auto ids = [](const std::vector<int>& vs) {
    std::string s;
    for (int v : vs) s += (s.empty() ? "%" : " %") + std::to_string(v);
    return s;
  };
  for (const PlannedStep& s : steps) {
    if (s.node >= 0) {
      const GraphNode& n = g.nodes[size_t(s.node)];
      os << "eager " << n.op->name << " -> " << ids(n.outputs) << ": " << s.reason << '\n';
      continue;
    }
    os << "region " << regions++ << ": " << s.region.nodes.size() << " ops (";
    for (size_t k = 0; k < s.region.nodes.size(); ++k)
      os << (k ? " " : "") << g.nodes[size_t(s.region.nodes[k])].op->name;
    os << "), reads " << ids(s.region.inputs) << ", writes " << ids(s.region.outputs);
    if (!s.region.packed.empty()) os << ", GEMM weights packed: " << ids(s.region.packed);
    if (!s.region.recomputed.empty()) os << ", recomputes " << ids(s.region.recomputed) << " (cheaper than a load)";
    os << '\n';
  }
  return os.str();
}

}  // namespace kiln
