#include "schedules/schedule_source.h"

#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace kiln {

using namespace Halide;
using namespace Halide::Internal;

namespace {

const char* tail_name(TailStrategy t) {
  switch (t) {
    case TailStrategy::RoundUp: return "RoundUp";
    case TailStrategy::GuardWithIf: return "GuardWithIf";
    case TailStrategy::Predicate: return "Predicate";
    case TailStrategy::PredicateLoads: return "PredicateLoads";
    case TailStrategy::PredicateStores: return "PredicateStores";
    case TailStrategy::ShiftInwards: return "ShiftInwards";
    case TailStrategy::Auto: return "Auto";
  }
  return "?";
}

// "x.xo" -> "xo": Halide qualifies a split's vars by their parent; the source names the Var.
std::string var(const std::string& qualified) {
  size_t dot = qualified.rfind('.');
  return dot == std::string::npos ? qualified : qualified.substr(dot + 1);
}

std::string level(const LoopLevel& l) {
  LoopLevel c = l;
  c.lock();
  if (c.is_root()) return "root";
  if (c.is_inlined()) return "inline";
  return c.func() + ", " + var(c.var().name());
}

// One stage: ".split(...)", ".reorder(...)", then each loop's kind.
void print_stage(std::ostringstream& os, const StageSchedule& s) {
  for (const Split& sp : s.splits()) {
    if (sp.is_split())
      os << "\n    .split(" << var(sp.old_var) << ", " << var(sp.outer) << ", " << var(sp.inner) << ", " << sp.factor
         << ", TailStrategy::"
         << tail_name(sp.tail) << ")";
    else if (sp.is_fuse())
      os << "\n    .fuse(" << var(sp.inner) << ", " << var(sp.outer) << ", " << var(sp.old_var) << ")";
    else if (sp.is_rename())
      os << "\n    .rename(" << var(sp.old_var) << ", " << var(sp.outer) << ")";
  }
  std::vector<std::string> order;
  for (const Dim& d : s.dims())
    if (d.var != Var::outermost().name()) order.push_back(var(d.var));
  if (order.size() > 1) {
    os << "\n    .reorder(";
    for (size_t i = 0; i < order.size(); ++i) os << (i ? ", " : "") << order[i];
    os << ")";
  }
  if (s.atomic()) os << "\n    .atomic()";
  for (const Dim& d : s.dims()) {
    switch (d.for_type) {
      case ForType::Parallel: os << "\n    .parallel(" << var(d.var) << ")"; break;
      case ForType::Vectorized: os << "\n    .vectorize(" << var(d.var) << ")"; break;
      case ForType::Unrolled: os << "\n    .unroll(" << var(d.var) << ")"; break;
      default: break;
    }
  }
}

}  // namespace

std::string schedule_source(const std::vector<Func>& outputs) {
  // Producers before consumers (a depth-first walk of the calls).
  std::vector<Function> order;
  std::set<std::string> seen;
  std::function<void(const Function&)> visit = [&](const Function& f) {
    if (!seen.insert(f.name()).second) return;
    for (const auto& [name, callee] : find_direct_calls(f)) visit(callee);
    order.push_back(f);
  };
  for (const Func& f : outputs) visit(f.function());

  std::ostringstream os;
  for (const Function& f : order) {
    std::string compute = level(f.schedule().compute_level()), store = level(f.schedule().store_level());
    if (compute == "inline") continue;
    os << f.name() << (compute == "root" ? ".compute_root()" : ".compute_at(" + compute + ")");
    if (store != compute && store != "inline") os << (store == "root" ? "\n    .store_root()" : "\n    .store_at(" + store + ")");
    print_stage(os, f.definition().schedule());
    os << ";\n";
    for (size_t u = 0; u < f.updates().size(); ++u) {
      std::ostringstream stage;
      print_stage(stage, f.updates()[u].schedule());
      if (!stage.str().empty()) os << f.name() << ".update(" << u << ")" << stage.str() << ";\n";
    }
  }
  return os.str();
}

std::string canonical_schedule_source(const std::string& source) {
  // Halide names a Func or var "k", then "k$1", "k$2" as more are made in the process; kiln's
  // generated vars are "v12". The suffixes go, and generated vars are numbered in the order they
  // first appear ("v#0"), so the text says nothing about what else the process built.
  static const std::regex unique(R"((\$[0-9]+)|(\bv[0-9]+\b))");
  std::map<std::string, int> vars;
  std::string out;
  auto last = source.cbegin();
  for (std::sregex_iterator it(source.begin(), source.end(), unique), end; it != end; ++it) {
    out.append(last, (*it)[0].first);
    last = (*it)[0].second;
    if ((*it)[1].matched) continue;
    auto [v, fresh] = vars.emplace(it->str(), int(vars.size()));
    out += "v#" + std::to_string(v->second);
  }
  out.append(last, source.cend());
  return out;
}

}  // namespace kiln
