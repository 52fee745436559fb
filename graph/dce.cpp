#include "graph/passes.h"

namespace kiln {

namespace {

std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  std::vector<int> work;
  auto reach = [&](int v) {
    int p = g.values[v].producer;
    if (p >= 0 && !live[p]) {
      live[p] = true;
      work.push_back(p);
    }
  };
  for (int v : g.outputs) reach(v);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op->effectful() && !live[n]) {
      live[n] = true;
      work.push_back(int(n));
    }
  while (!work.empty()) {
    int n = work.back();
    work.pop_back();
    for (int v : g.nodes[n].inputs) reach(v);
  }
  return live;
}

}  // namespace

int eliminate_dead_code(Graph& g) {
  std::vector<bool> live = live_nodes(g);
  GraphRewrite r(g);
  int removed = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (live[n]) r.copy(g.nodes[n]);
    else ++removed;
  }
  g = std::move(r).finish();
  return removed;
}

}  // namespace kiln
