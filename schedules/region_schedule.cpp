#include "schedules/region_schedule.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"
#include "dsl/fnv_hash.h"
#include "dsl/settings.h"
#include "schedules/graph_executor.h"
#include "schedules/region_signature.h"
#include "schedules/tuning_db.h"

namespace kiln {

std::string region_schedule_key(const std::string& signature) { return fnv1a_hex(signature); }

RegionSchedule parse_region_schedule(const std::string& text, const std::string& where) {
  RegionSchedule s;
  s.text = text;
  s.where = where;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name, value, extra;
    if (!(words >> name)) continue;
    const RowTunable* row = find_row_tunable(name);
    const CpuTunable* cpu = find_cpu_tunable(name);
    KILN_CHECK(row || cpu, "region schedule ", where, ":", number, ": unknown directive '", name, "'; known:\n",
               region_schedule_directives());
    int64_t lo = row ? row->lo : cpu->lo, hi = row ? row->hi : cpu->hi;
    KILN_CHECK(words >> value && !(words >> extra), "region schedule ", where, ":", number, ": '", name,
               "' takes one whole number, got '", line, "'");
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    KILN_CHECK(used == value.size(), "region schedule ", where, ":", number, ": '", name,
               "' takes a whole number, got '", value, "'");
    KILN_CHECK(v >= lo && v <= hi, "region schedule ", where, ":", number, ": '", name, "' must lie in [", lo, ", ",
               hi, "], got ", v);
    s.directives.emplace_back(name, v);
  }
  return s;
}

std::optional<RegionSchedule> find_region_schedule(const std::string& signature) {
  std::optional<std::string> dir = setting("KILN_SCHEDULE_DIR");
  if (!dir) return std::nullopt;
  std::filesystem::path path = std::filesystem::path(*dir) / (region_schedule_key(signature) + ".schedule");
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream text;
  text << f.rdbuf();
  return parse_region_schedule(text.str(), path.string());
}

std::optional<RegionSchedule> region_schedule_of(const Graph& g, const Region& r, bool cuda) {
  // No signature to compute where neither folder exists (nothing was ever tuned here).
  std::string db_dir = tuning_db_dir();
  bool files = setting("KILN_SCHEDULE_DIR").has_value(), db = !db_dir.empty() && std::filesystem::is_directory(db_dir);
  if (!files && !db) return std::nullopt;
  std::string signature = region_signature(g, r);
  std::optional<RegionSchedule> s = files ? find_region_schedule(signature) : std::nullopt;
  // A CUDA region compiled where no device is (an AOT export) has no machine to match.
  if (!s && db && (!cuda || cuda_available())) {
    int v = !r.outputs.empty() ? r.outputs[0] : r.inputs.at(0);
    std::string device = tuning_device_name(g.values[size_t(v)].meta.device);
    if (std::optional<TuningRecord> record = find_tuning_record("region", signature, device)) {
      s = parse_region_schedule(record->body, tuning_record_path("region", signature, device));
      s->from_database = true;
    }
  }
  if (!s) return s;
  for (const auto& [name, value] : s->directives)
    KILN_CHECK(cuda ? find_row_tunable(name) != nullptr : find_cpu_tunable(name) != nullptr, "region schedule ",
               s->where, ": '", name, "' is a directive of the ", cuda ? "CPU" : "CUDA", " schedule, and this region (",
               region_what(r), ") runs on ", cuda ? "CUDA" : "the CPU");
  return s;
}

RowTuning apply_region_schedule(const RegionSchedule& s, RowTuning base) {
  for (const auto& [name, value] : s.directives)
    if (const RowTunable* t = find_row_tunable(name)) t->set(base, value);
  return base;
}

CpuTuning cpu_tuning_of(const std::optional<RegionSchedule>& own) {
  CpuTuning t;
  if (own)
    for (const auto& [name, value] : own->directives)
      if (const CpuTunable* c = find_cpu_tunable(name)) c->set(t, value);
  return t;
}

RowTuning row_tuning_of(const std::optional<RegionSchedule>& own) {
  return own ? apply_region_schedule(*own, default_row_tuning()) : default_row_tuning();
}

std::string region_schedule_directives() {
  std::string out;
  auto line = [&](const char* directive, int64_t lo, int64_t hi, const char* what) {
    out += "  " + std::string(directive) + " " + std::to_string(lo) + ".." + std::to_string(hi) + ": " + what + "\n";
  };
  for (const CpuTunable& d : cpu_tunables()) line(d.directive, d.lo, d.hi, d.what);
  for (const RowTunable& d : row_tunables()) line(d.directive, d.lo, d.hi, d.what);
  return out;
}

RowTuningScope::RowTuningScope(const RowTuning& t) : tuning_(t) { saved_ = exchange_row_tuning(&tuning_); }

RowTuningScope::~RowTuningScope() { exchange_row_tuning(saved_); }

}  // namespace kiln
