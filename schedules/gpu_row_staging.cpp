#include "schedules/gpu_row_staging.h"

#include <functional>
#include <map>
#include <set>

namespace kiln {

using namespace Halide;

namespace {

// Whether every call of `callee` inside `exprs` passes `ok` on its arguments.
bool every_call(const std::vector<Expr>& exprs, const std::string& callee,
                const std::function<bool(const std::vector<Expr>&)>& ok) {
  struct Calls : Internal::IRVisitor {
    const std::string& name;
    const std::function<bool(const std::vector<Expr>&)>& ok;
    bool all = true;
    Calls(const std::string& n, const std::function<bool(const std::vector<Expr>&)>& o) : name(n), ok(o) {}
    using Internal::IRVisitor::visit;
    void visit(const Internal::Call* c) override {
      if (c->name == name) all = all && ok(c->args);
      Internal::IRVisitor::visit(c);
    }
  } calls(callee, ok);
  for (const Expr& e : exprs) e.accept(&calls);
  return calls.all;
}

// Whether f reads p only at f's own point (f(x, y) = ... p(x, y) ...), or, for p of lower rank, at
// f's leading vars (f(x, y) = ... w(x) ...: a layer_norm weight along the row): a block's rows of
// f then need the same rows of p. A transposed read could need far more than a row a warp.
bool reads_in_place(const Func& f, const ImageParam& p) {
  if (f.function().has_update_definition()) return false;
  std::vector<std::string> own;
  for (const Var& v : f.args())
    if (int(own.size()) < p.dimensions()) own.push_back(v.name());
  return every_call(f.function().definition().values(), Func(p).name(), [&](const std::vector<Expr>& args) {
    if (args.size() != own.size()) return false;
    for (size_t i = 0; i < args.size(); ++i) {
      const auto* v = args[i].as<Internal::Variable>();
      if (!v || v->name != own[i]) return false;
    }
    return true;
  });
}

// Whether every call of `callee` in g's definitions (pure and update) reads the row of g's own
// point: each argument past the first (the row's elements, which a staged row holds whole, as a
// reduction along it reads them) is one of g's own vars. A gather (an embedding's row picked by
// an index) or a read of another row needs rows the block has not staged.
bool calls_within_own_row(const Func& g, const std::string& callee) {
  std::set<std::string> own;
  for (const Var& v : g.args()) own.insert(v.name());
  const Internal::Function& f = g.function();
  std::vector<Expr> exprs = f.definition().values();
  for (const Internal::Definition& u : f.updates()) {
    exprs.insert(exprs.end(), u.values().begin(), u.values().end());
    exprs.insert(exprs.end(), u.args().begin(), u.args().end());
  }
  return every_call(exprs, callee, [&](const std::vector<Expr>& args) {
    for (size_t i = 1; i < args.size(); ++i) {
      const auto* v = args[i].as<Internal::Variable>();
      if (!v || !own.count(v->name)) return false;
    }
    return true;
  });
}

// The Funcs of root (its Func, its reductions, the Funcs inlined into them) that read input p:
// they call the ImageParam's own Func (Halide names it "<param>_im"), which p.in() may wrap.
// Empty when one of them is also inlined into another root (the pipeline's other outputs: a
// wrapper computed inside this root's loops would not exist there), or reads p elsewhere than at
// its own point (reads_in_place): then p is not staged.
std::vector<Func> stageable_readers(const ScheduleRoot& root, const ImageParam& p, const std::set<std::string>& shared) {
  std::vector<Func> direct;
  const std::string own = Func(p).name();
  for (const Func& f : root_funcs(root)) {
    if (f.name() == own || !Internal::find_direct_calls(f.function()).count(own)) continue;
    if (shared.count(f.name()) || !reads_in_place(f, p)) return {};
    direct.push_back(f);
  }
  // The readers' own readers must stay within the row too (an embedding reads its table's wrapper
  // at the row its index picks).
  for (const Func& reader : direct)
    for (const Func& g : root_funcs(root))
      if (g.name() != reader.name() && Internal::find_direct_calls(g.function()).count(reader.name()) &&
          !calls_within_own_row(g, reader.name()))
        return {};
  return direct;
}

}  // namespace

std::set<std::string> shared_funcs(const std::vector<ScheduleRoot>& roots) {
  std::map<std::string, int> uses;
  for (const ScheduleRoot& root : roots) {
    std::set<std::string> mine;
    for (const Func& f : root_funcs(root)) mine.insert(f.name());
    for (const std::string& n : mine) uses[n] += 1;
  }
  std::set<std::string> shared;
  for (const auto& [name, n] : uses)
    if (n > 1) shared.insert(name);
  return shared;
}

bool stage_inputs(const ScheduleRoot& root, const std::vector<ImageParam>& inputs, const std::set<std::string>& shared,
                  int64_t elements, int64_t max_bytes, const std::function<void(Func, int)>& place,
                  bool lower_rank_floats) {
  int64_t bytes = 0;
  bool staged = false;
  for (const ImageParam& p : inputs) {
    bool lower = lower_rank_floats && p.type().is_float() && p.dimensions() >= 1 &&
                 p.dimensions() < root.func.dimensions();
    if (p.dimensions() != root.func.dimensions() && !lower) continue;
    int64_t need = elements * p.type().bytes();
    if (bytes + need > max_bytes) continue;
    std::vector<Func> readers = stageable_readers(root, p, shared);
    if (readers.empty()) continue;
    try {
      ImageParam param = p;
      place(param.in(readers), p.type().bytes());
      bytes += need;
      staged = true;
    } catch (const CompileError&) {
    }
  }
  return staged;
}

}  // namespace kiln
