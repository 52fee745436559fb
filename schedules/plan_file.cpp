#include "schedules/plan_file.h"

#include <algorithm>
#include <sstream>

#include "dsl/error.h"
#include "graph/graph_file.h"
#include "graph/text_records.h"

namespace kiln {

namespace {

constexpr int kVersion = 1;
constexpr std::string_view kHeader = "kiln-plan ";

}  // namespace

std::string write_plan(const ExecutorPlan& plan) {
  std::ostringstream os;
  os << write_graph(*plan.graph) << kHeader << kVersion << '\n';
  for (const ExecutorStep& s : plan.steps) {
    if (s.node >= 0) {
      os << "eager " << s.node << ' ' << int(bool(s.packed_b)) << '\n';
      continue;
    }
    KILN_CHECK(!s.function_name.empty(), "write_plan: ", region_what(s.region),
               " has no compiled function (a JIT-compiled plan cannot be written; leave the disk cache on)");
    const Region& r = s.region;
    os << "region " << s.function_name << ' ' << record_list(r.nodes) << ' ' << record_list(r.inputs) << ' '
       << record_list(r.outputs) << ' ' << record_list(r.symbols) << ' ' << record_list(r.packed) << ' '
       << record_list(r.in_place) << ' ' << record_list(r.recomputed) << '\n';
  }
  for (const auto& [v, positions] : plan.in_place) os << "in_place " << v << ' ' << record_list(positions) << '\n';
  for (const auto& [v, x] : plan.over) os << "over " << v << ' ' << x << '\n';
  os << "end\n";
  return os.str();
}

ExecutorPlan read_plan(std::string_view text, std::shared_ptr<const CodeLibrary> code) {
  size_t at = text.find("\n" + std::string(kHeader));
  KILN_CHECK(at != std::string_view::npos, "read_plan: no '", kHeader, kVersion, "' line after the graph");
  ExecutorPlan plan;
  plan.graph = std::make_shared<Graph>(read_graph(text.substr(0, at + 1)));
  plan.code = std::move(code);
  const Graph& g = *plan.graph;
  int number = int(std::count(text.begin(), text.begin() + long(at) + 1, '\n'));
  std::istringstream is{std::string(text.substr(at + 1))};
  bool ended = false;
  for (std::string line; std::getline(is, line);) {
    TextRecord f(line, ++number, "read_plan");
    if (f.size() == 0) continue;
    f.check(!ended, "text after 'end'");
    const std::string& kind = f.str(0);
    if (kind == "kiln-plan") {
      f.expect(2);
      f.check(f.integer(1) == kVersion, "plan format version " + f.str(1) + ", this kiln reads " + std::to_string(kVersion));
    } else if (kind == "eager") {
      f.expect(3);
      ExecutorStep& s = plan.steps.emplace_back();
      s.node = f.id(1, g.nodes.size());
      if (f.integer(2) != 0) s.packed_b = std::make_shared<PackedWeight>(PackedWeight::Layout::dense);
    } else if (kind == "region") {
      f.expect(9);
      ExecutorStep& s = plan.steps.emplace_back();
      s.function_name = f.str(1);
      Region& r = s.region;
      r.nodes = f.ids(2, g.nodes.size());
      r.inputs = f.ids(3, g.values.size());
      r.outputs = f.ids(4, g.values.size());
      r.symbols = f.ids(5, size_t(g.shape_env->symbol_count()));
      r.packed = f.ids(6, g.values.size());
      r.in_place = f.ids(7, g.values.size());
      r.recomputed = f.ids(8, g.values.size());
      f.check(plan.code != nullptr, "a region needs compiled code, and no library was given");
      try {
        s.function = plan.code->function(s.function_name);
      } catch (const Error& e) {
        f.fail(e.what());
      }
      s.packers = region_packers(r);
    } else if (kind == "in_place") {
      f.expect(3);
      plan.in_place[f.id(1, g.values.size())] = f.ids(2, g.inputs.size());
    } else if (kind == "over") {
      f.expect(3);
      plan.over[f.id(1, g.values.size())] = f.id(2, g.values.size());
    } else if (kind == "end") {
      ended = true;
    } else {
      f.fail("unknown record '" + kind + "'");
    }
  }
  KILN_CHECK(ended, "read_plan: the text ends before the plan's 'end'");
  return plan;
}

}  // namespace kiln
