#include "schedules/cpu_schedule.h"

#include <algorithm>
#include <set>

namespace kiln {

using namespace Halide;

namespace {

constexpr int64_t kParallelMinElements = 1 << 15;
constexpr int kChunk = 1 << 13;  // elements per parallel task of a 1-D Func

std::vector<Var> pure_vars(const Func& f) {
  std::vector<Var> v;
  for (const Var& a : f.args()) v.push_back(a);
  return v;
}

void schedule_root(Func f, const Shape& shape) {
  std::vector<Var> v = pure_vars(f);
  int R = int(v.size());
  if (R == 0) return;
  int vec = get_jit_target_from_environment().natural_vector_size(f.output_types()[0]);
  if (shape.back() >= vec) f.vectorize(v[0], vec, TailStrategy::GuardWithIf);
  if (numel(shape) < kParallelMinElements) return;
  if (R >= 2) {
    f.parallel(v[R - 1]);
  } else {
    Var o("o"), i("i");
    f.split(v[0], o, i, kChunk, TailStrategy::GuardWithIf).parallel(o);
  }
}

// The Funcs f calls, directly or through inlined Funcs, stopping at the ones in `stop`.
std::vector<Func> calls_until(const Func& f, const std::set<std::string>& stop) {
  std::vector<Func> out;
  std::set<std::string> seen{f.name()};
  std::vector<Internal::Function> todo{f.function()};
  while (!todo.empty()) {
    Internal::Function fn = todo.back();
    todo.pop_back();
    for (const auto& [name, callee] : Internal::find_direct_calls(fn)) {
      if (stop.count(name) || !seen.insert(name).second) continue;
      out.push_back(Func(callee));
      todo.push_back(callee);
    }
  }
  return out;
}

}  // namespace

void schedule_cpu(const Graph& g, const Region& r, LoweredRegion& lowered) {
  std::vector<std::pair<Func, int>> roots;  // materialized Funcs, with the value each holds
  for (size_t k = 0; k < r.outputs.size(); ++k) roots.emplace_back(lowered.outputs[k], r.outputs[k]);
  std::set<std::string> stop;
  for (auto& [f, v] : roots) stop.insert(f.name());
  for (const Func& m : lowered.materialized) {
    if (stop.count(m.name())) continue;  // already an output
    for (auto& [v, t] : lowered.values)
      if (t.func.name() == m.name()) {
        roots.emplace_back(m, v);
        stop.insert(m.name());
        break;
      }
  }
  for (const ImageParam& p : lowered.inputs) stop.insert(p.name());

  for (auto& [f, v] : roots) {
    f.compute_root();
    schedule_root(f, g.values[v].meta.shape);
    std::vector<Var> args = pure_vars(f);
    for (Func inner : calls_until(f, stop)) {
      if (!inner.has_update_definition()) continue;  // pure Funcs stay inlined
      if (args.empty()) inner.compute_root();
      else inner.compute_at(f, args.back());
    }
  }
}

}  // namespace kiln
