#include "schedules/gpu_bounds_check.h"

#include "schedules/gpu_launch_check.h"

#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

namespace kiln {

using namespace Halide;
using namespace Halide::Internal;

namespace {

// The elements a buffer's flat index may reach: 1 + sum over dims of (extent - 1) * stride, from
// the "<name>.extent.<d>" and "<name>.stride.<d>" sizes (mins are 0 as traced).
std::map<std::string, int64_t> buffer_spans(const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> span;
  for (const auto& [key, extent] : sizes) {
    size_t at = key.rfind(".extent.");
    if (at == std::string::npos) continue;
    std::string name = key.substr(0, at), dim = key.substr(at + 8);
    auto stride = sizes.find(name + ".stride." + dim);
    if (stride == sizes.end()) continue;
    span.emplace(name, 1);
    span[name] += (extent - 1) * stride->second;
  }
  return span;
}

// The constant limits of `i`, or nothing where a limit is not a constant.
std::optional<std::pair<int64_t, int64_t>> constant_limits(const Interval& i) {
  const int64_t* l = i.has_lower_bound() ? as_const_int(simplify(i.min)) : nullptr;
  const int64_t* h = i.has_upper_bound() ? as_const_int(simplify(i.max)) : nullptr;
  if (!l || !h) return std::nullopt;
  return std::make_pair(*l, *h);
}

// `e` with the bounds-query tests of the pipeline's entry (Halide asks whether a call only wants
// its buffers' bounds) taken as false: the accesses checked are those of a real call.
Expr real_call(const Expr& e) {
  struct NoQuery : IRMutator {
    using IRMutator::visit;
    Expr visit(const Call* c) override {
      if (c->name == "_halide_buffer_is_bounds_query") return const_false();
      return IRMutator::visit(c);
    }
  } m;
  return m.mutate(e);
}

// Walks a lowered body with each loop variable's and let's interval in scope, narrowed by the
// conditions of the ifs around an access.
class BoundsWalker : public IRVisitor {
 public:
  BoundsWalker(const std::map<std::string, int64_t>& sizes, GpuBounds& out) : spans_(buffer_spans(sizes)), out_(out) {
    for (const auto& [name, v] : sizes) {
      sizes_[name] = make_const(Int(32), v);
      scope_.push(name, Interval::single_point(sizes_[name]));
    }
  }

 private:
  using IRVisitor::visit;

  std::map<std::string, int64_t> spans_;  // buffers and constant allocations: elements
  GpuBounds& out_;
  Scope<Interval> scope_;
  std::map<std::string, Expr> sizes_;  // the known sizes' values (their lets are not rebound)
  std::string kernel_;           // the outermost GPU loop around the walk, if any

  // What encloses the access being checked, outermost first: loops, lets and if conditions.
  struct Frame {
    enum Kind { loop, let, condition } kind;
    std::string name;
    Expr a, b;  // loop: min, extent; let: value; condition: a
  };
  std::vector<Frame> frames_;

  // Concrete runs of the frames around an access, each loop at its first and last iterations (all
  // of a short one), in search of a point where `index` leaves [0, span). `exhaustive` stays true
  // while every run was tried and every condition had a value.
  struct Search {
    const Expr& index;
    int64_t span;
    int budget = 20000;
    bool exhaustive = true;
    std::string found;  // the point that leaves the buffer, if any
  };
  bool search(size_t k, std::map<std::string, Expr>& env, Search& q) {
    if (--q.budget < 0) {
      q.exhaustive = false;
      return false;
    }
    auto eval = [&](const Expr& e) { return simplify(substitute(env, e)); };
    if (k == frames_.size()) {
      auto limits = constant_limits(bounds_of_expr_in_scope(eval(q.index), Scope<Interval>::empty_scope()));
      if (!limits) {
        q.exhaustive = false;
        return false;
      }
      auto [l, h] = *limits;
      if (l >= 0 && h < q.span) return false;
      std::ostringstream at;
      at << "elements " << l << ".." << h << " of " << q.span << " where";
      for (const Frame& f : frames_)
        if (f.kind == Frame::loop) at << " " << f.name << " = " << env[f.name];
      q.found = at.str();
      return true;
    }
    const Frame& f = frames_[k];
    if (f.kind == Frame::let) {
      env[f.name] = eval(f.a);
      bool hit = search(k + 1, env, q);
      env.erase(f.name);
      return hit;
    }
    if (f.kind == Frame::condition) {
      Expr c = eval(f.a);
      if (is_const_zero(c)) return false;
      if (!is_const_one(c)) {  // data-dependent: nothing certain below
        q.exhaustive = false;
        return false;
      }
      return search(k + 1, env, q);
    }
    const int64_t* lo = as_const_int(eval(f.a));
    const int64_t* n = as_const_int(eval(f.b));
    if (!lo || !n) {
      q.exhaustive = false;
      return false;
    }
    std::vector<int64_t> values;
    for (int64_t i = 0; i < *n; ++i) {
      if (i == 8 && *n > 16) {
        q.exhaustive = false;
        i = *n - 8;
      }
      values.push_back(*lo + i);
    }
    for (int64_t v : values) {
      env[f.name] = make_const(Int(32), v);
      if (search(k + 1, env, q)) return true;
    }
    env.erase(f.name);
    return false;
  }

  void check(const std::string& name, const Expr& index, const char* what) {
    auto span = spans_.find(name);
    if (span == spans_.end()) return;
    auto limits = constant_limits(bounds_of_expr_in_scope(index, scope_));
    if (!limits) {
      ++out_.unbounded;
      return;
    }
    if (limits->first >= 0 && limits->second < span->second) {
      ++out_.checked;
      return;
    }
    // The bounds are loose where a guard's condition or a loop's extent correlates variables
    // (a tail loop's clamped extent): look for a point that leaves the buffer.
    std::map<std::string, Expr> env = sizes_;
    Search q{index, span->second};
    if (!search(0, env, q)) {
      ++(q.exhaustive ? out_.checked : out_.unbounded);
      return;
    }
    std::ostringstream s;
    s << what << " " << name << " at " << q.found;
    if (!kernel_.empty()) s << " in kernel " << kernel_;
    out_.outside.push_back(s.str());
  }

  void visit(const Load* op) override {
    IRVisitor::visit(op);
    if (is_const_one(op->predicate)) check(op->name, op->index, "a load of");
  }
  void visit(const Store* op) override {
    IRVisitor::visit(op);
    if (is_const_one(op->predicate)) check(op->name, op->index, "a store to");
  }
  void visit(const Allocate* op) override {
    int64_t elements = 1;
    for (const Expr& e : op->extents) {
      const int64_t* c = as_const_int(simplify(e));
      elements = c && elements > 0 ? elements * *c : -1;
    }
    bool had = spans_.count(op->name) > 0;
    int64_t saved = had ? spans_[op->name] : 0;
    if (elements > 0) spans_[op->name] = elements;
    else spans_.erase(op->name);
    IRVisitor::visit(op);
    if (had) spans_[op->name] = saved;
    else spans_.erase(op->name);
  }
  void visit(const For* op) override {
    op->min.accept(this);
    op->extent.accept(this);
    Interval m = bounds_of_expr_in_scope(op->min, scope_), e = bounds_of_expr_in_scope(op->extent, scope_);
    Interval range(m.min, m.max.defined() && e.max.defined() && m.has_upper_bound() && e.has_upper_bound()
                              ? simplify(m.max + e.max - 1)
                              : Interval::pos_inf());
    bool opens = kernel_.empty() && (op->for_type == ForType::GPUBlock || op->for_type == ForType::GPUThread);
    if (opens) kernel_ = op->name;
    scope_.push(op->name, range);
    frames_.push_back({Frame::loop, op->name, op->min, op->extent});
    op->body.accept(this);
    frames_.pop_back();
    scope_.pop(op->name);
    if (opens) kernel_.clear();
  }
  template <typename LetOp>
  void let(const LetOp* op) {
    op->value.accept(this);
    bool bind = !sizes_.count(op->name);
    if (bind) scope_.push(op->name, bounds_of_expr_in_scope(op->value, scope_));
    if (bind) frames_.push_back({Frame::let, op->name, op->value, Expr()});
    op->body.accept(this);
    if (bind) frames_.pop_back();
    if (bind) scope_.pop(op->name);
  }
  void visit(const LetStmt* op) override { let(op); }
  void visit(const Let* op) override { let(op); }

  // Each variable of the condition narrowed to where it holds (solve_for_inner_interval), its
  // limits bounded over the rest of the scope.
  void narrowed(const Expr& condition, const Stmt& body) {
    std::vector<std::string> names;
    struct Vars : IRVisitor {
      std::vector<std::string>& names;
      explicit Vars(std::vector<std::string>& n) : names(n) {}
      using IRVisitor::visit;
      void visit(const Variable* v) override { names.push_back(v->name); }
    } vars(names);
    condition.accept(&vars);
    std::vector<Expr> conjuncts;
    std::function<void(const Expr&)> split = [&](const Expr& e) {
      if (const And* a = e.as<And>()) {
        split(a->a);
        split(a->b);
      } else if (const Call* c = e.as<Call>(); c && (c->is_intrinsic(Call::likely) ||
                                                      c->is_intrinsic(Call::likely_if_innermost))) {
        split(c->args[0]);
      } else {
        conjuncts.push_back(e);
      }
    };
    split(condition);
    std::vector<std::string> pushed;
    for (const std::string& name : std::set<std::string>(names.begin(), names.end())) {
      if (!scope_.contains(name) || sizes_.count(name)) continue;
      Interval where = Interval::everything();
      for (const Expr& c : conjuncts)
        if (expr_uses_var(c, name)) where = Interval::make_intersection(where, solve_for_inner_interval(c, name));
      Interval now = scope_.get(name);
      if (where.has_upper_bound()) {
        Interval b = bounds_of_expr_in_scope(where.max, scope_);
        if (b.has_upper_bound()) now.max = now.has_upper_bound() ? simplify(min(now.max, b.max)) : b.max;
      }
      if (where.has_lower_bound()) {
        Interval b = bounds_of_expr_in_scope(where.min, scope_);
        if (b.has_lower_bound()) now.min = now.has_lower_bound() ? simplify(max(now.min, b.min)) : b.min;
      }
      pushed.push_back(name);
      scope_.push(name, now);
    }
    frames_.push_back({Frame::condition, "", real_call(condition), Expr()});
    body.accept(this);
    frames_.pop_back();
    for (const std::string& name : pushed) scope_.pop(name);
  }
  void visit(const IfThenElse* op) override {
    op->condition.accept(this);
    narrowed(op->condition, op->then_case);
    if (op->else_case.defined()) {
      frames_.push_back({Frame::condition, "", real_call(!op->condition), Expr()});
      op->else_case.accept(this);
      frames_.pop_back();
    }
  }
};

}  // namespace

std::shared_ptr<const GpuBounds> record_gpu_bounds(Pipeline& p, const std::map<std::string, int64_t>& sizes) {
  auto out = std::make_shared<GpuBounds>();
  inspect_lowered(p, [sizes, out](const Stmt& s) {
    *out = GpuBounds{};
    BoundsWalker w(sizes, *out);
    s.accept(&w);
  });
  return out;
}

}  // namespace kiln
