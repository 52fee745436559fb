#include "graph/min_cut.h"

#include <algorithm>
#include <deque>

namespace kiln {

MinCut::MinCut(int nodes) : out_(size_t(nodes)) {}

void MinCut::add_edge(int from, int to, int64_t capacity) {
  out_[size_t(from)].push_back(int(edges_.size()));
  edges_.push_back({to, capacity});
  out_[size_t(to)].push_back(int(edges_.size()));
  edges_.push_back({from, 0});
}

bool MinCut::levels(int source, int sink) {
  level_.assign(out_.size(), -1);
  std::deque<int> queue{source};
  level_[size_t(source)] = 0;
  while (!queue.empty()) {
    int n = queue.front();
    queue.pop_front();
    for (int e : out_[size_t(n)]) {
      const Edge& edge = edges_[size_t(e)];
      if (edge.capacity > 0 && level_[size_t(edge.to)] < 0) {
        level_[size_t(edge.to)] = level_[size_t(n)] + 1;
        queue.push_back(edge.to);
      }
    }
  }
  return level_[size_t(sink)] >= 0;
}

int64_t MinCut::push(int node, int sink, int64_t limit) {
  if (node == sink) return limit;
  for (int& i = next_[size_t(node)]; i < int(out_[size_t(node)].size()); ++i) {
    int e = out_[size_t(node)][size_t(i)];
    Edge& edge = edges_[size_t(e)];
    if (edge.capacity <= 0 || level_[size_t(edge.to)] != level_[size_t(node)] + 1) continue;
    int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
    if (pushed > 0) {
      edge.capacity -= pushed;
      edges_[size_t(e ^ 1)].capacity += pushed;
      return pushed;
    }
  }
  return 0;
}

int64_t MinCut::solve(int source, int sink) {
  int64_t flow = 0;
  while (levels(source, sink)) {
    next_.assign(out_.size(), 0);
    while (int64_t pushed = push(source, sink, infinite)) flow += pushed;
  }
  reach_.assign(out_.size(), false);
  for (size_t n = 0; n < out_.size(); ++n) reach_[n] = level_[n] >= 0;
  return flow;
}

}  // namespace kiln
