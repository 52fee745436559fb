#include "schedules/gpu_hosted_rows.h"

#include <algorithm>

namespace kiln {

using namespace Halide;

namespace {

// The dims of `value`'s shape that are not always 1, without its last `drop` dims.
std::vector<SymDim> kept_dims(const Graph& g, int value, size_t drop) {
  const SymShape& sym = g.values[size_t(value)].sym;
  std::vector<SymDim> kept;
  for (size_t d = 0; d + drop < sym.size(); ++d)
    if (SymDim c = g.shape_env->canonical(sym[d]); !(c == SymDim::constant(1))) kept.push_back(c);
  return kept;
}

}  // namespace

std::vector<Hosted> hosted_rows(const Graph& g, const Region& r, const std::vector<ScheduleRoot>& roots) {
  std::vector<Hosted> hosted(roots.size());
  if (!r.in_place.empty()) return hosted;
  std::vector<std::vector<int>> readers(roots.size());
  for (size_t k = 0; k < roots.size(); ++k)
    for (int h : roots[k].reads) readers[size_t(h)].push_back(int(k));
  std::vector<int> host(roots.size(), -1);
  auto candidate = [&](size_t h, size_t o) {
    const ScheduleRoot &rh = roots[h], &ro = roots[o];
    const int reducing = reducing_value(rh);
    if (std::count(r.outputs.begin(), r.outputs.end(), rh.value) || rh.inner.empty() || rh.fused_row_op >= 0 ||
        reduction_kind(g, reducing) != Reduces::rows || g.values[size_t(ro.value)].sym.empty())
      return false;
    for (const Func& inner : rh.inner)
      if (inner.dimensions() == 0) return false;
    return reduction_length(g, reducing) == row_length(g, ro.value) && kept_dims(g, rh.value, 0) == kept_dims(g, ro.value, 1);
  };
  for (bool changed = true; changed;) {  // a root read by o and by a root o hosts (the mean, read by 1/std's variance)
    changed = false;
    for (size_t h = 0; h < roots.size(); ++h) {
      if (host[h] >= 0 || readers[h].empty() || std::count(host.begin(), host.end(), int(h))) continue;
      for (int o : readers[h]) {
        bool only_o = std::all_of(readers[h].begin(), readers[h].end(), [&](int k) { return k == o || host[size_t(k)] == o; });
        if (host[size_t(o)] < 0 && only_o && candidate(h, size_t(o))) {
          host[h] = o;
          changed = true;
          break;
        }
      }
    }
  }
  for (size_t h = 0; h < roots.size(); ++h)
    if (host[h] >= 0) hosted[size_t(host[h])].push_back(&roots[h]);
  return hosted;
}

}  // namespace kiln
