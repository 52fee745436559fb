// A compiled region's own schedule choices, overriding kiln's defaults for that region alone (the
// first part of issue 25's schedule language): a CUDA region's row and column tunables
// (schedules/gpu_row_tuning.h, which the KILN_GPU_ROW_* settings set for every region at once),
// a CPU region's task size, parallelism, vector width, reduction partials and tile sizes
// (schedules/cpu_tuning.h). A layer_norm's forward ran fastest at 512 threads a row on an H100 and
// its backward at 256; one setting cannot give both.
//
// A region's schedule is found by its key (16 hex digits of its signature, region_signature.h),
// which KILN_LOGS=schedule prints for every region, in a file <key>.schedule of the folder
// KILN_SCHEDULE_DIR. Its text, one directive a line, `#` starting a comment:
//
//   # a pipeline of 2 ops (add layer_norm) -> [8192, 768]
//   gpu.row.threads 512
//   gpu.row.registers 0
//
// The directives are the tunables' names (region_schedule_directives() lists them with their
// ranges); an unknown directive, a value out of range, or a directive of the other device's
// schedule is a kiln::Error naming the file, the line or the directive. A region's schedule text
// is part of the disk cache's key of the graph that holds it.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "schedules/cpu_tuning.h"
#include "schedules/gpu_row_tuning.h"
#include "schedules/region.h"

namespace kiln {

struct RegionSchedule {
  std::vector<std::pair<std::string, int64_t>> directives;  // in file order; later lines win
  std::string text;   // as read, for the cache key
  std::string where;  // its file, for errors
  bool from_database = false;  // a tuning database record (else a KILN_SCHEDULE_DIR file)
};

// The key of a region with this signature: 16 hex digits.
std::string region_schedule_key(const std::string& signature);

// Parses a schedule's text; `where` names it in errors ("FILE").
RegionSchedule parse_region_schedule(const std::string& text, const std::string& where);

// The schedule of the region with this signature from KILN_SCHEDULE_DIR, or none (no folder, or
// no file for it).
std::optional<RegionSchedule> find_region_schedule(const std::string& signature);
// The schedule of region r of g: its file in KILN_SCHEDULE_DIR (a user's), else its record in the
// tuning database for the device it runs on (`kiln tune`'s, schedules/tuning_db.h), else none;
// kiln::Error for a directive of the other device's schedule (`cuda`: r runs on CUDA).
std::optional<RegionSchedule> region_schedule_of(const Graph& g, const Region& r, bool cuda);

// `base` with the schedule's CUDA directives applied.
RowTuning apply_region_schedule(const RegionSchedule& s, RowTuning base);
// The CUDA tunables of a region with this schedule (none: the settings').
RowTuning row_tuning_of(const std::optional<RegionSchedule>& own);
// The CPU tunables of a region with this schedule (none: the defaults).
CpuTuning cpu_tuning_of(const std::optional<RegionSchedule>& own);

// "gpu.row.threads 32..1024: threads per block of a block row", one line each.
std::string region_schedule_directives();

// For its lifetime, row_tuning() on this thread returns `t` (schedule_gpu sets its region's).
class RowTuningScope {
 public:
  explicit RowTuningScope(const RowTuning& t);
  ~RowTuningScope();
  RowTuningScope(const RowTuningScope&) = delete;
  RowTuningScope& operator=(const RowTuningScope&) = delete;

 private:
  const RowTuning* saved_;
  RowTuning tuning_;
};

}  // namespace kiln
