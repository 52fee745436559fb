#include "bench/real_breakdown.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "autograd/engine.h"
#include "bench/gpu_timing.h"
#include "bench/op_profile.h"
#include "bench/timing.h"
#include "graph/step_timing.h"

namespace kiln::bench {

namespace {

constexpr size_t kTopSteps = 25;  // the costliest steps of a compiled step, printed and kept

// The backward nodes of an eager step by name, each timed with the device waited for around it
// (the backward runs with dispatch modes suspended, so OpProfile does not see its ops).
class BackwardNodeTimes final : public BackwardNodeObserver {
 public:
  explicit BackwardNodeTimes(Device d) : d_(d) {}
  void before(const std::string&) override {
    cuda_synchronize(d_.index);
    t0_ = now_seconds();
  }
  void after(const std::string& node) override {
    cuda_synchronize(d_.index);
    OpProfile::Entry& e = entries_[node];
    e.calls += 1;
    e.seconds += now_seconds() - t0_;
  }
  const std::map<std::string, OpProfile::Entry>& entries() const { return entries_; }

 private:
  Device d_;
  double t0_ = 0;
  std::map<std::string, OpProfile::Entry> entries_;
};

}  // namespace


void step_breakdown(const std::string& model, Device d, const std::function<void()>& step, StepTables& tables) {
  Json& rows = tables.breakdown;
  Json& top_steps = tables.top_steps;
  Json& top_groups = tables.top_groups;
  std::vector<StepTime> normal, waited;
  double total = 0;
  {
    StepTimer t(d.index);
    CudaMarks marks(d.index);
    marks.mark();
    step();
    marks.mark();
    total = marks.intervals_ms().at(0);
    normal = t.results();
  }
  {
    StepTimer t(d.index, /*synchronize=*/true);
    step();
    cuda_synchronize(d.index);
    waited = t.results();
  }
  std::map<std::string, double> ms, host_ms;
  double inside = 0;
  struct Top {
    double own, idle;
    const StepTime* step;
  };
  std::vector<Top> tops;
  for (size_t i = 0; i < normal.size(); ++i) {
    double own = i < waited.size() && waited[i].what == normal[i].what ? std::min(waited[i].ms, normal[i].ms)
                                                                       : normal[i].ms;
    double idle = normal[i].ms - own + normal[i].gap_before_ms;
    ms[normal[i].category] += own;
    host_ms[normal[i].category] += normal[i].host_ms;
    ms["idle_gaps"] += idle;
    inside += normal[i].ms + normal[i].gap_before_ms;
    tops.push_back({own, idle, &normal[i]});
  }
  // The steps that cost the most (their own time plus the idle time before them).
  std::sort(tops.begin(), tops.end(), [](const Top& a, const Top& b) { return a.own + a.idle > b.own + b.idle; });
  std::printf("  %s compiled step, its %zu graph steps; the costliest:\n", model.c_str(), normal.size());
  for (size_t i = 0; i < tops.size() && i < kTopSteps; ++i) {
    std::printf("    %8.3f ms own %8.3f ms idle before %8.3f ms host  %-13s %s\n", tops[i].own, tops[i].idle,
                tops[i].step->host_ms, tops[i].step->category.c_str(), tops[i].step->what.c_str());
    Json t = Json::object();
    t.set("model", model);
    t.set("what", tops[i].step->what);
    t.set("category", tops[i].step->category);
    t.set("ms", tops[i].own);
    t.set("idle_before_ms", tops[i].idle);
    t.set("host_ms", tops[i].step->host_ms);
    top_steps.push(t);
  }
  // The same steps grouped by what they are (a layer's GEMM or region recurs once per layer).
  std::map<std::string, std::pair<int, double>> groups;
  for (const Top& t : tops) {
    auto& g = groups[t.step->category + "  " + t.step->what];
    g.first += 1;
    g.second += t.own + t.idle;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> grouped(groups.begin(), groups.end());
  std::sort(grouped.begin(), grouped.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("  %s compiled step, its graph steps grouped by what they run; the costliest:\n", model.c_str());
  for (size_t i = 0; i < grouped.size() && i < kTopSteps; ++i) {
    std::printf("    %8.3f ms %4dx  %s\n", grouped[i].second.second, grouped[i].second.first, grouped[i].first.c_str());
    Json g = Json::object();
    g.set("model", model);
    g.set("what", grouped[i].first);
    g.set("calls", grouped[i].second.first);
    g.set("ms", grouped[i].second.second);
    top_groups.push(g);
  }
  ms["outside_graphs"] = std::max(0.0, total - inside);
  ms["total"] = total;
  std::printf("  %s compiled step, host time issuing the steps by category:", model.c_str());
  for (const auto& [category, v] : host_ms) std::printf(" %s %.2f", category.c_str(), v);
  std::printf("\n  %s compiled step, device time by category (of %.2f ms):", model.c_str(), total);
  for (const auto& [category, v] : ms) {
    if (category == "total") continue;
    std::printf(" %s %.2f", category.c_str(), v);
    Json r = Json::object();
    r.set("model", model);
    r.set("category", category);
    r.set("ms", v);
    rows.push(r);
  }
  Json r = Json::object();
  r.set("model", model);
  r.set("category", "total");
  r.set("ms", total);
  rows.push(r);
  std::printf("\n");
}

void eager_op_breakdown(const std::string& model, Device d, const std::function<void()>& step, Json& rows) {
  OpProfile profile([d] { cuda_synchronize(d.index); });
  BackwardNodeTimes backward(d);
  cuda_synchronize(d.index);
  double t0 = now_seconds();
  BackwardNodeObserver* saved = set_backward_node_observer(&backward);
  {
    DispatchModeGuard g(&profile);
    step();
  }
  set_backward_node_observer(saved);
  cuda_synchronize(d.index);
  double total = now_seconds() - t0;
  double nodes = 0;
  for (const auto& [name, e] : backward.entries()) nodes += e.seconds;
  std::printf("  %s eager step, %.2f ms with the device waited for around each op and backward node; backward "
              "nodes %.2f ms:\n", model.c_str(), total * 1e3, nodes * 1e3);
  OpProfile::print(backward.entries(), total, 15, "backward node");
  std::printf("  forward and optimizer ops (an op that runs others is counted under each name):\n");
  profile.print(total, 15);
  auto add = [&](const std::map<std::string, OpProfile::Entry>& entries, const char* kind) {
    for (const auto& [name, e] : entries) {
      Json r = Json::object();
      r.set("model", model);
      r.set("kind", kind);
      r.set("name", name);
      r.set("calls", double(e.calls));
      r.set("ms", e.seconds * 1e3);
      rows.push(r);
    }
  };
  add(profile.entries(), "op");
  add(backward.entries(), "backward_node");
}

}  // namespace kiln::bench
