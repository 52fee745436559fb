#include "schedules/in_place.h"

#include <algorithm>
#include <set>

#include "schedules/lowerable.h"

namespace kiln {

namespace {

struct Uses {
  std::vector<std::vector<int>> readers;  // per value: the nodes that read it
  std::vector<int> step_of;               // per node: its step
  std::set<int> outputs;
  std::set<int> region_outputs;  // values a region stores (its own readers read them back)
};

// The nodes whose pointwise expressions are inlined into v's Func, with v's own: v's producer and,
// through values of v's shape that only it reads, theirs (all in v's region).
std::set<int> inlined_cone(const Graph& g, const Uses& u, int v) {
  std::set<int> cone;
  std::vector<int> todo{g.values[size_t(v)].producer};
  int step = u.step_of[size_t(todo[0])];
  const Shape& shape = g.values[size_t(v)].meta.shape;
  while (!todo.empty()) {
    int n = todo.back();
    todo.pop_back();
    if (!is_elementwise(g.nodes[size_t(n)]) || !cone.insert(n).second) continue;
    for (int w : g.nodes[size_t(n)].inputs) {
      int p = g.values[size_t(w)].producer;
      if (p >= 0 && u.step_of[size_t(p)] == step && g.values[size_t(w)].meta.shape == shape &&
          u.readers[size_t(w)].size() == 1 && !u.region_outputs.count(w))
        todo.push_back(p);
    }
  }
  return cone;
}

// Every node that reads x or a view of it, with the views themselves.
std::vector<int> readers_through_views(const Graph& g, const Uses& u, int x) {
  std::vector<int> out;
  std::vector<int> todo{x};
  while (!todo.empty()) {
    int w = todo.back();
    todo.pop_back();
    for (int n : u.readers[size_t(w)]) {
      out.push_back(n);
      if (g.nodes[size_t(n)].op->schedule_class == ScheduleClass::view) todo.push_back(g.nodes[size_t(n)].outputs[0]);
    }
  }
  return out;
}

Uses uses_of(const Graph& g, const std::vector<PlannedStep>& steps) {
  Uses u;
  u.readers = readers_of(g);
  u.step_of = step_of_nodes(g, steps);
  u.outputs.insert(g.outputs.begin(), g.outputs.end());
  for (const PlannedStep& s : steps) u.region_outputs.insert(s.region.outputs.begin(), s.region.outputs.end());
  return u;
}

// Whether the old value of x may be overwritten by v, made at `step` by the expression `cone`:
// every read of x or of a view of it comes before that step, or is in the cone at that step.
bool only_read_before(const Graph& g, const Uses& u, int x, int step, const std::set<int>& cone) {
  for (int n : readers_through_views(g, u, x))
    if (u.step_of[size_t(n)] > step || (u.step_of[size_t(n)] == step && !cone.count(n))) return false;
  return true;
}

bool dense(const Value& v) { return v.strides == contiguous_strides(v.meta.shape) && v.offset == 0; }

}  // namespace

std::map<int, std::vector<int>> in_place_outputs(const Graph& g, const std::vector<PlannedStep>& steps) {
  std::map<int, std::vector<int>> into;
  if (g.writes.empty()) return into;
  Uses u = uses_of(g, steps);
  // Inputs bound to one tensor (a parameter captured from the module and again from the
  // optimizer) are one memory: what reads any of them must come before the write, or be the
  // write's own expression.
  std::map<int, std::vector<int>> aliases;  // output position -> the inputs it overwrites
  for (const auto& [k, i] : g.writes) aliases[k].push_back(i);
  for (const auto& [k, inputs] : aliases) {
    int v = g.outputs[size_t(k)];
    const Value& out = g.values[size_t(v)];
    if (std::count(g.outputs.begin(), g.outputs.end(), v) != 1 || !u.region_outputs.count(v) || into.count(v) ||
        out.meta.shape.empty())
      continue;
    std::set<int> cone = inlined_cone(g, u, v);
    int step = u.step_of[size_t(out.producer)];
    bool safe = true;
    for (int i : inputs) {
      int x = g.inputs[size_t(i)].value;
      const Value& in = g.values[size_t(x)];
      safe = safe && !u.outputs.count(x) && out.meta.shape == in.meta.shape && out.meta.dtype == in.meta.dtype &&
             dense(in) && only_read_before(g, u, x, step, cone);
    }
    if (safe) into[v] = inputs;
  }
  return into;
}

std::map<int, int> reused_intermediates(const Graph& g, const std::vector<PlannedStep>& steps,
                                        const std::map<int, std::vector<int>>& in_place) {
  std::map<int, int> over;
  Uses u = uses_of(g, steps);
  std::set<int> taken;
  for (size_t si = 0; si < steps.size(); ++si) {
    const Region& r = steps[si].region;
    if (steps[si].node >= 0) continue;
    for (int v : r.outputs) {
      const Value& out = g.values[size_t(v)];
      if (in_place.count(v) || out.meta.shape.empty() || !is_elementwise(g.nodes[size_t(out.producer)])) continue;
      std::set<int> cone = inlined_cone(g, u, v);
      for (int x : r.inputs) {
        const Value& in = g.values[size_t(x)];
        if (in.producer < 0 || u.outputs.count(x) || taken.count(x)) continue;  // a graph input, returned, or taken
        const GraphNode& maker = g.nodes[size_t(in.producer)];
        bool own_memory = u.region_outputs.count(x) || maker.op->gemm;
        if (!own_memory || in.meta.shape != out.meta.shape || in.meta.dtype != out.meta.dtype || !dense(in) ||
            !only_read_before(g, u, x, int(si), cone))
          continue;
        over[v] = x;
        taken.insert(x);
        break;
      }
    }
  }
  return over;
}

}  // namespace kiln
