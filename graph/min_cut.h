// A minimum s-t cut (Dinic's max-flow) over a small directed graph with int64 capacities; the
// partitioner (graph/partition.h) cuts a joint graph with it.
//
//   MinCut c(4);                 // nodes 0..3
//   c.add_edge(0, 1, 5); c.add_edge(1, 3, 2); c.add_edge(0, 2, 1); c.add_edge(2, 3, 4);
//   int64_t flow = c.solve(0, 3);              // 3
//   bool s_side = c.source_side()[1];          // true: 1 is reachable after the cut
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace kiln {

class MinCut {
 public:
  static constexpr int64_t infinite = std::numeric_limits<int64_t>::max() / 4;

  explicit MinCut(int nodes);
  void add_edge(int from, int to, int64_t capacity);
  // The maximum flow from `source` to `sink` (the cut's capacity).
  int64_t solve(int source, int sink);
  // After solve(): the nodes still reachable from the source in the residual graph.
  const std::vector<bool>& source_side() const { return reach_; }

 private:
  struct Edge {
    int to;
    int64_t capacity;
  };
  bool levels(int source, int sink);
  int64_t push(int node, int sink, int64_t limit);

  std::vector<Edge> edges_;               // edge e and its reverse e ^ 1
  std::vector<std::vector<int>> out_;     // per node: its edges
  std::vector<int> level_, next_;
  std::vector<bool> reach_;
};

}  // namespace kiln
