#include "graph/grad_hook_groups.h"

#include "dsl/error.h"

namespace kiln {

GradHookGroups::GradHookGroups(const TensorList& leaves) {
  slot_of_.assign(leaves.size(), {-1, {-1, -1}});
  std::map<TracedGradHooks*, int> set_of;
  for (size_t k = 0; k < leaves.size(); ++k) {
    std::shared_ptr<TracedGradHooks> h = active_traced_grad_hooks(leaves[k]);
    if (!h) continue;
    auto [it, fresh] = set_of.emplace(h.get(), int(sets_.size()));
    if (fresh) {
      Set s;
      s.hooks = h;
      s.groups = h->groups();
      for (const TensorList& g : s.groups) {
        s.grads.emplace_back(g.size());
        s.waiting.push_back(0);
      }
      s.started.resize(s.groups.size());
      sets_.push_back(std::move(s));
    }
    Set& s = sets_[size_t(it->second)];
    bool found = false;
    for (size_t g = 0; g < s.groups.size() && !found; ++g)
      for (size_t i = 0; i < s.groups[g].size() && !found; ++i)
        if (s.groups[g][i].impl_ptr() == leaves[k].impl_ptr()) {
          slot_of_[k] = {it->second, {int(g), int(i)}};
          ++s.waiting[g];
          found = true;
        }
    KILN_CHECK(found, "backward: a leaf (shape ", to_string(leaves[k].shape()), ") has traced grad-ready hooks "
               "whose groups do not hold it");
  }
  for (Set& s : sets_) start_ready(s);  // groups none of whose leaves this backward reaches
}

void GradHookGroups::start_ready(Set& s) {
  while (s.next < s.groups.size() && s.waiting[s.next] == 0) {
    s.started[s.next] = s.hooks->start(int(s.next), s.grads[s.next]);
    ++s.next;
  }
}

void GradHookGroups::final(size_t k, const Tensor& grad) {
  const auto& [set, where] = slot_of_[k];
  if (set < 0) return;
  Set& s = sets_[size_t(set)];
  s.grads[size_t(where.first)][size_t(where.second)] = grad;
  --s.waiting[size_t(where.first)];
  start_ready(s);
}

std::vector<std::pair<Tensor, Tensor>> GradHookGroups::finish() {
  std::vector<std::pair<Tensor, Tensor>> out;
  for (Set& s : sets_) {
    KILN_CHECK(s.next == s.groups.size(), "backward: ", s.groups.size() - s.next, " gradient groups never became "
               "final (a leaf's gradient was not reported)");
    for (size_t g = 0; g < s.groups.size(); ++g) {
      TensorList grads = s.hooks->finish(int(g), s.started[g]);
      KILN_CHECK(grads.size() == s.groups[g].size(), "backward: traced grad-ready hooks gave ", grads.size(),
                 " gradients for a group of ", s.groups[g].size(), " leaves");
      for (size_t i = 0; i < grads.size(); ++i) out.push_back({s.groups[g][i], grads[i]});
    }
  }
  return out;
}

}  // namespace kiln
