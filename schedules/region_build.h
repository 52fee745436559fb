// One region of a graph compiled into a Halide pipeline: lowered (lower_region.h), scheduled by
// kiln's CPU or GPU schedule or one of Halide's autoschedulers (kiln's when it fails a trial run),
// given specialize() branches for size conditions, its schedule logged (KILN_LOGS=schedule) and
// dumped with its lowered statement and assembly (KILN_DEBUG_DIR). The halide backend builds each
// distinct region once, into the disk cache's library (region_library.h) or JIT-compiled.
#pragma once
#include <Halide.h>

#include <string>
#include <vector>

#include "graph/backend.h"
#include "schedules/graph_executor.h"
#include "schedules/lower_region.h"
#include "schedules/region_schedule.h"
#include "schedules/size_specialization.h"

namespace kiln {

// A step as the executor runs it, with what compiling its region takes.
struct RegionStep : ExecutorStep {
  bool cuda = false;  // the region's values live on the GPU: CUDA target, GPU schedule
  // The region's own schedule from KILN_SCHEDULE_DIR, read once when the step is made: the
  // disk cache's key, the schedule and the schedule log all use this one.
  std::optional<RegionSchedule> own_schedule;
  LoweredRegion lowered;
  Halide::Pipeline pipeline;
  std::vector<std::string> specialized;  // specialize() branches added (size_specialization.h)
};

// Lowers and schedules s's region into s.pipeline, with a specialize() branch for each of
// `conditions` on its sizes (CPU regions); `index` names it in logs and dumps.
void build_region(const Graph& g, RegionStep& s, const BackendOptions& options, int index,
                  const std::vector<SizeCondition>& conditions = {});

// The region steps, in order.
std::vector<RegionStep*> region_steps(std::vector<RegionStep>& steps);

// For each region step, the first one that lowers to the same pipeline (region_signature.h).
std::vector<int> same_pipelines(const Graph& g, const std::vector<RegionStep*>& regions);


}  // namespace kiln
