#include <algorithm>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include "dsl/error.h"
#include "dsl/op_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

namespace halide_tables {
// Weak: defined in kiln_defs, which a run-time-only program (kiln::runtime) does not link.
void add_all_ops(std::vector<OpDef>& defs) __attribute__((weak));
}  // namespace halide_tables

namespace {

struct Registry {
  std::vector<OpDef> defs;
  std::unordered_map<std::string_view, size_t> index;
  // Ops added at run time (custom ops): a deque keeps each at its address.
  std::deque<OpDef> added;
  std::unordered_map<std::string_view, const OpDef*> added_index;
  mutable std::shared_mutex added_mu;

  Registry() {
    // The tables with their Halide definitions where kiln_defs is linked, else the run time's
    // (dsl/ops/op_tables.h).
    if (halide_tables::add_all_ops)
      halide_tables::add_all_ops(defs);
    else
      runtime_tables::add_all_ops(defs);
    for (size_t i = 0; i < defs.size(); ++i) {
      bool fresh = index.emplace(defs[i].name, i).second;
      KILN_CHECK(fresh, "op registry: op '", defs[i].name, "' is defined twice");
      const OpDef& d = defs[i];
      KILN_CHECK((d.schedule_class == ScheduleClass::view) == bool(d.view.layout) &&
                     bool(d.view.layout) == bool(d.view.index),
                 "op registry: view op '", d.name, "' needs both a layout rule and an index rule (ViewDef), "
                 "and only view ops have them");
    }
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::string_view name(ScheduleClass c) {
  switch (c) {
    case ScheduleClass::pointwise: return "pointwise";
    case ScheduleClass::reduction: return "reduction";
    case ScheduleClass::normalization: return "normalization";
    case ScheduleClass::matmul: return "matmul";
    case ScheduleClass::gather: return "gather";
    case ScheduleClass::scatter: return "scatter";
    case ScheduleClass::data_movement: return "data_movement";
    case ScheduleClass::view: return "view";
    case ScheduleClass::creation: return "creation";
    case ScheduleClass::custom: return "custom";
  }
  return "?";
}

std::string to_string(const TensorMeta& m) {
  std::ostringstream s;
  s << name(m.dtype) << to_string(m.shape) << " on " << m.device;
  return s.str();
}

const OpDef* find_op_def(std::string_view name) {
  const Registry& r = registry();
  if (auto it = r.index.find(name); it != r.index.end()) return &r.defs[it->second];
  std::shared_lock lock(r.added_mu);
  auto it = r.added_index.find(name);
  return it == r.added_index.end() ? nullptr : it->second;
}

const OpDef& op_def(std::string_view name) {
  const OpDef* d = find_op_def(name);
  KILN_CHECK(d, "op registry: no op named '", name, "'",
             name.find("::") != std::string_view::npos ? " (a custom op is known once register_op has run)" : "");
  return *d;
}

std::vector<const OpDef*> all_op_defs() {
  Registry& r = registry();
  std::vector<const OpDef*> out;
  for (const OpDef& d : r.defs) out.push_back(&d);
  std::shared_lock lock(r.added_mu);
  for (const OpDef& d : r.added) out.push_back(&d);
  return out;
}

const OpDef& add_op_def(OpDef def) {
  Registry& r = registry();
  std::unique_lock lock(r.added_mu);
  KILN_CHECK(!r.index.count(def.name) && !r.added_index.count(def.name), "op registry: op '", def.name,
             "' is already registered");
  const OpDef& d = r.added.emplace_back(std::move(def));
  r.added_index.emplace(d.name, &d);
  return d;
}

}  // namespace kiln
