#include "schedules/object_export.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "dsl/error.h"
#include "schedules/plan_file.h"
#include "schedules/shared_library.h"

namespace kiln {

namespace {

thread_local ObjectExport* open_export = nullptr;

}  // namespace

bool is_c_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

ObjectExport::ObjectExport(std::string dir, std::string prefix, std::vector<SizeCondition> conditions,
                           std::vector<Halide::Target> targets)
    : dir_(std::move(dir)),
      prefix_(std::move(prefix)),
      conditions_(std::move(conditions)),
      targets_(std::move(targets)) {
  KILN_CHECK(is_c_identifier(prefix_), "export: the function prefix '", prefix_,
             "' is not a C identifier (letters, digits and '_', not starting with a digit)");
  for (const Halide::Target& t : targets_)
    KILN_CHECK(!t.has_feature(Halide::Target::CUDA) || targets_.size() == 1, "export: CUDA target ", t.to_string(),
               " with other targets; a CUDA export has one");
  std::filesystem::create_directories(dir_);
  outer_ = open_export;
  open_export = this;
}

ObjectExport::~ObjectExport() { open_export = outer_; }

ObjectExport* ObjectExport::current() { return open_export; }

std::vector<Halide::Target> ObjectExport::targets_for(bool cuda) const {
  if (targets_.empty() || targets_[0].has_feature(Halide::Target::CUDA) != cuda) return {};
  return targets_;
}

std::string ObjectExport::begin_graph(const std::string& label) {
  ExportedGraph& g = graphs_.emplace_back();
  g.prefix = prefix_ + "_g" + std::to_string(graphs_.size() - 1);
  g.label = label;
  return g.prefix;
}

void ObjectExport::add_objects(const std::vector<std::string>& objects) {
  KILN_CHECK(!graphs_.empty(), "export: objects before a graph began");
  ExportedGraph& g = graphs_.back();
  g.object = (std::filesystem::path(dir_) / (g.prefix + ".o")).string();
  link_relocatable_object(objects, g.object);
}

void ObjectExport::note_specialized(std::string what) {
  KILN_CHECK(!graphs_.empty(), "export: a specialization before a graph began");
  graphs_.back().specialized.push_back(std::move(what));
}

void ObjectExport::finish_graph(const ExecutorPlan& plan) {
  KILN_CHECK(!graphs_.empty(), "export: a plan before a graph began");
  ExportedGraph& g = graphs_.back();
  g.plan = write_plan(plan);
  g.graph = plan.graph;
  for (const ExecutorStep& s : plan.steps)
    if (s.node < 0 && std::find(g.functions.begin(), g.functions.end(), s.function_name) == g.functions.end())
      g.functions.push_back(s.function_name);
}

}  // namespace kiln
