#include "autograd/tape_memory.h"

#include <unordered_set>

#include "autograd/node.h"

namespace kiln {

int64_t tape_saved_bytes(const Tensor& root, const TensorList& alive_anyway) {
  std::unordered_set<const Storage*> skip, counted;
  for (const Tensor& t : alive_anyway) skip.insert(t.storage().get());
  Edge edge = edge_of(root);
  if (!edge.node) return 0;
  std::unordered_set<const Node*> seen{edge.node.get()};
  std::vector<const Node*> work{edge.node.get()};
  int64_t total = 0;
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    for (const auto* list : {&n->inputs, &n->outputs})
      for (const SavedTensor& s : *list) {
        const Storage* st = s.value.storage().get();
        if (!skip.count(st) && counted.insert(st).second) total += int64_t(st->nbytes);
      }
    for (const Edge& e : n->next)
      if (e.node && seen.insert(e.node.get()).second) work.push_back(e.node.get());
  }
  return total;
}

}  // namespace kiln
