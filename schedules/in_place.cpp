#include "schedules/in_place.h"

#include <algorithm>
#include <atomic>
#include <set>

namespace kiln {

namespace {

std::atomic<int64_t> run_count{0};

// Pointwise at the element it writes: a copy may read through a view, so it does not count.
bool elementwise(const GraphNode& n) { return is_pointwise(n) && n.op->family != KernelFamily::copy; }

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
    if (!elementwise(g.nodes[size_t(n)]) || !cone.insert(n).second) continue;
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

}  // namespace

std::map<int, std::vector<int>> in_place_outputs(const Graph& g, const std::vector<PlannedStep>& steps) {
  std::map<int, std::vector<int>> into;
  if (g.writes.empty()) return into;
  Uses u;
  u.readers = readers_of(g);
  u.step_of = step_of_nodes(g, steps);
  u.outputs.insert(g.outputs.begin(), g.outputs.end());
  for (const PlannedStep& s : steps) u.region_outputs.insert(s.region.outputs.begin(), s.region.outputs.end());
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
             in.strides == contiguous_strides(in.meta.shape) && in.offset == 0;
      for (int n : readers_through_views(g, u, x))
        safe = safe && (u.step_of[size_t(n)] < step || (cone.count(n) && u.step_of[size_t(n)] == step));
    }
    if (safe) into[v] = inputs;
  }
  return into;
}

int64_t in_place_outputs_run() { return run_count.load(); }
void count_in_place_outputs(int64_t n) { run_count += n; }

}  // namespace kiln
