#include "schedules/custom_schedule.h"

#include <algorithm>
#include <optional>

#include "schedules/gpu_reductions.h"
#include "schedules/gpu_warp_rows.h"
#include "schedules/jit_target.h"
#include "schedules/schedule_roots.h"

namespace kiln {

using namespace Halide;

namespace {

// Whether every call of `name` in the Exprs visited has exactly `args`.
class SelfReads : public Internal::IRVisitor {
 public:
  SelfReads(std::string name, std::vector<Expr> args) : name_(std::move(name)), args_(std::move(args)) {}
  bool same_element = true;

 private:
  using IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    IRVisitor::visit(c);
    if (c->call_type != Internal::Call::Halide || c->name != name_) return;
    if (c->args.size() != args_.size()) same_element = false;
    for (size_t i = 0; i < c->args.size() && same_element; ++i)
      same_element = Internal::equal(c->args[i], args_[i]);
  }
  std::string name_;
  std::vector<Expr> args_;
};

// Whether the Exprs visited call `name`.
class CallsOf : public Internal::IRVisitor {
 public:
  explicit CallsOf(std::string name) : name_(std::move(name)) {}
  bool found = false;

 private:
  using IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    IRVisitor::visit(c);
    found = found || (c->call_type == Internal::Call::Halide && c->name == name_);
  }
  std::string name_;
};

// Reductions into each element from at least this many points run a warp per element.
constexpr int64_t kWarpPerElementMin = 256;

// Update u's domain split into GPU blocks and threads (its first two reduction vars, as a tile
// when there are two); loops of further vars stay outside (one kernel each) or inside.
void rvars_on_gpu(Stage s, const std::vector<RVar>& r) {
  using gpu_rows::kThreads;
  if (r.size() >= 2) {
    s.gpu_tile(r[0], r[1], RVar("rbx"), RVar("rby"), RVar("rtx"), RVar("rty"), 16, 16, kGuard);
  } else {
    s.gpu_tile(r[0], RVar("rbx"), RVar("rtx"), kThreads, kGuard);
  }
}

// Points in update u's reduction domain where the traced sizes fix its extents (1024 for an
// extent that varies).
int64_t domain_size(const Func& f, int u) {
  int64_t n = 1;
  for (const Internal::ReductionVariable& r : f.function().update(u).schedule().rvars()) {
    const int64_t* e = Internal::as_const_int(Internal::simplify(r.extent));
    n *= e ? std::max<int64_t>(*e, 1) : 1024;
  }
  return n;
}

// A reduction into each element from a long domain (a row's sum): a block of a warp per element,
// each lane summing every 32nd point of the domain (consecutive lanes read consecutive points),
// then the lanes' partial sums added. False where Halide cannot split it (a reduction it cannot
// prove associative); the domain's split then stays, and a thread per element runs it in order.
bool warp_per_element(Func f) {
  std::vector<Var> v = pure_vars(f);
  if (v.empty() || f.num_update_definitions() != 1 || f.rvars(0).empty()) return false;
  try {
    Stage s = f.update();
    RVar r = f.rvars(0).size() == 1 ? f.rvars(0)[0] : warp_rows::fuse_all(s, f.rvars(0)), ro("ro"), ri("ri");
    Var lane("lane");
    Func partials = s.split(r, ro, ri, warp_rows::kWarp, kGuard).rfactor(ri, lane);
    Var element = warp_rows::fuse_all(f.update(), v);
    f.update().gpu_blocks(element);
    partials.compute_at(f, element).gpu_threads(lane);
    partials.update().reorder(ro, lane).gpu_threads(lane);
  } catch (const CompileError&) {
    return false;
  }
  return true;
}

}  // namespace

bool custom_definition(const Graph& g, int v) {
  int p = g.values[size_t(v)].producer;
  return p >= 0 && g.nodes[size_t(p)].op->custom && g.nodes[size_t(p)].op->define;
}

UpdateWrites update_writes(const Func& f, int u) {
  const Internal::Definition& d = f.function().update(u);
  const std::vector<std::string>& pure = f.function().args();
  bool own = d.args().size() == pure.size();
  for (size_t i = 0; i < d.args().size() && own; ++i) {
    const auto* var = d.args()[i].as<Internal::Variable>();
    own = var && !var->reduction_domain.defined() && var->name == pure[i];
  }
  if (own) {
    SelfReads reads(f.name(), d.args());
    for (const Expr& e : d.values()) e.accept(&reads);
    if (reads.same_element) return UpdateWrites::own_elements;
  }
  // f(i) = f(i) + e, e not reading f: a sum into elements the domain picks.
  if (d.values().size() == 1 && !f.rvars(u).empty()) {
    const auto* add = d.values()[0].as<Internal::Add>();
    const auto* self = add ? add->a.as<Internal::Call>() : nullptr;
    if (self && self->call_type == Internal::Call::Halide && self->name == f.name()) {
      SelfReads lhs(f.name(), d.args());
      add->a.accept(&lhs);
      CallsOf rest(f.name());
      add->b.accept(&rest);
      if (lhs.same_element && !rest.found) return UpdateWrites::accumulates;
    }
  }
  return UpdateWrites::other;
}

void schedule_custom_inner_cpu(Func f, const CpuTuning& tuning) {
  f.compute_root();
  std::vector<Var> v = pure_vars(f);
  if (v.empty()) return;
  const int lanes = jit_target().natural_vector_size(f.output_types()[0]);
  f.vectorize(v[0], lanes, TailStrategy::GuardWithIf);
  // The outermost dim in parallel; a 1-D Func in tasks of about tuning.task_elements units of
  // work (an element of an update costs its domain's size, where the traced sizes fix it).
  // Returns the loop of the stage's innermost element.
  auto in_parallel = [&](Stage s, int64_t work) {
    if (!tuning.parallel || v.size() >= 2) {
      if (tuning.parallel) s.parallel(v.back());
      return v[0];
    }
    Var o("o"), i("i");
    int64_t task = std::clamp<int64_t>(tuning.task_elements / std::max<int64_t>(work, 1), 16, 1 << 20);
    s.split(v[0], o, i, int(task), TailStrategy::GuardWithIf).parallel(o);
    return i;
  };
  in_parallel(f, 1);
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    if (update_writes(f, u) != UpdateWrites::own_elements) {
      f.update(u).unscheduled();  // serial, as written: it may write one element from many
      continue;
    }
    // A long sum into each element (a row's): vector partial sums per element, then added. The
    // rfactor comes before the element loop's split (after it, Halide 14 added some rows twice).
    std::optional<Func> partials;
    const int width = tuning.partials * lanes;
    const int64_t work = domain_size(f, u);  // before the rfactor leaves a domain of `width`
    RVar ro("ro"), ri("ri");
    Var lane("lane");
    if (f.num_update_definitions() == 1 && work >= 4 * width) {
      try {
        Stage s = f.update(u);
        RVar r = f.rvars(u).size() == 1 ? f.rvars(u)[0] : warp_rows::fuse_all(s, f.rvars(u));
        partials = s.split(r, ro, ri, width, TailStrategy::GuardWithIf).rfactor(ri, lane);
      } catch (const CompileError&) {  // not provably associative: each element's sum in order
      }
    }
    Var element = in_parallel(f.update(u), work);
    if (!partials) continue;
    partials->compute_at(f, element).vectorize(lane, width);
    partials->update().vectorize(lane, width);
    f.update(u).atomic().vectorize(ri);  // the partials' sum as one horizontal add
  }
}

void schedule_custom_inner_gpu(Func f) {
  f.compute_root();
  gpu_reductions::thread_per_point(f, pure_vars(f));
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    Stage s = f.update(u);
    switch (update_writes(f, u)) {
      case UpdateWrites::own_elements:
        if (domain_size(f, u) < kWarpPerElementMin || !warp_per_element(f)) gpu_reductions::thread_per_point(s, pure_vars(f));
        break;
      case UpdateWrites::accumulates: rvars_on_gpu(s.atomic(), f.rvars(u)); break;
      case UpdateWrites::other: s.gpu_single_thread(); break;
    }
  }
}

}  // namespace kiln
