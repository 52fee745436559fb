#include "schedules/region_schedule.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "dsl/error.h"
#include "dsl/settings.h"
#include "schedules/region_signature.h"

namespace kiln {

namespace {

// One directive: its name, its range, what it sets and what it means.
struct Directive {
  const char* name;
  int64_t lo, hi;
  std::function<void(RowTuning&, int64_t)> set;
  const char* what;
};

const std::vector<Directive>& directives() {
  static const std::vector<Directive> table = {
      {"gpu.row.threads", warp_rows::kWarp, 1024, [](RowTuning& t, int64_t v) { t.threads = int(v); },
       "threads per block of a row a block"},
      {"gpu.row.stage", 0, 1, [](RowTuning& t, int64_t v) { t.stage = v != 0; },
       "1 stages a block's row in shared memory"},
      {"gpu.row.registers", 0, 1, [](RowTuning& t, int64_t v) { t.registers = v != 0; },
       "0 keeps no row in registers"},
      {"gpu.row.host", 0, 1, [](RowTuning& t, int64_t v) { t.host = v != 0; },
       "0 computes per-row values one row op reads in kernels of their own"},
      {"gpu.row.warp", -1, 1, [](RowTuning& t, int64_t v) { t.warp = int(v); },
       "1 a warp per row, 0 a block per row, -1 by the rows' count and length"},
      {"gpu.row.unroll", 1, 16, [](RowTuning& t, int64_t v) { t.unroll = int(v); },
       "a row reduction's serial steps unrolled by this"},
      {"gpu.warp.rows", 0, 32, [](RowTuning& t, int64_t v) { t.warp_rows = int(v); },
       "rows a block of a warp-row op (0: by the row length)"},
      {"gpu.column.threads", 1024, int64_t(1) << 24, [](RowTuning& t, int64_t v) { t.column_threads = v; },
       "threads a column reduction's chunks of rows are sized for"},
      {"gpu.column.chunk_max", gpu_rows::kColumnChunkMin, 65536,
       [](RowTuning& t, int64_t v) { t.column_chunk_max = v; }, "the most rows a column reduction's chunk"},
      {"gpu.column.unroll", 1, 16, [](RowTuning& t, int64_t v) { t.column_unroll = int(v); },
       "a column reduction's serial sum unrolled by this"},
  };
  return table;
}

const Directive* find_directive(const std::string& name) {
  for (const Directive& d : directives())
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace

std::string region_schedule_key(const std::string& signature) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char c : signature) h = (h ^ c) * 0x100000001b3ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

RegionSchedule parse_region_schedule(const std::string& text, const std::string& where) {
  RegionSchedule s;
  s.text = text;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name, value, extra;
    if (!(words >> name)) continue;
    const Directive* d = find_directive(name);
    KILN_CHECK(d, "region schedule ", where, ":", number, ": unknown directive '", name, "'; known:\n",
               region_schedule_directives());
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
    KILN_CHECK(v >= d->lo && v <= d->hi, "region schedule ", where, ":", number, ": '", name, "' must lie in [",
               d->lo, ", ", d->hi, "], got ", v);
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

std::optional<RegionSchedule> region_schedule_of(const Graph& g, const Region& r) {
  if (!setting("KILN_SCHEDULE_DIR")) return std::nullopt;
  return find_region_schedule(region_signature(g, r));
}

RowTuning apply_region_schedule(const RegionSchedule& s, RowTuning base) {
  for (const auto& [name, value] : s.directives) find_directive(name)->set(base, value);
  return base;
}

std::string region_schedule_directives() {
  std::string out;
  for (const Directive& d : directives())
    out += "  " + std::string(d.name) + " " + std::to_string(d.lo) + ".." + std::to_string(d.hi) + ": " + d.what + "\n";
  return out;
}

RowTuningScope::RowTuningScope(const RowTuning& t) : tuning_(t) { saved_ = exchange_row_tuning(&tuning_); }

RowTuningScope::~RowTuningScope() { exchange_row_tuning(saved_); }

}  // namespace kiln
