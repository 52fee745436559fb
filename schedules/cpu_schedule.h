// kiln's CPU schedule for a lowered region (first version): pointwise chains stay inlined into
// the Func that reads them; each materialized Func (outputs, reductions, row ops, shared values)
// is computed once, vectorized along its innermost dim and parallel over its outermost when it is
// large; the per-row Funcs inside an op's definition (a row's max, sum, mean) are computed once per
// iteration of their consumer's outermost loop, not once per element. Its choices are the
// tunables of `tuning` (cpu_tuning.h): the defaults, or the region's own schedule file's.
#pragma once
#include "schedules/cpu_tuning.h"
#include "schedules/lower_region.h"

namespace kiln {

void schedule_cpu(const Graph& g, const Region& r, LoweredRegion& lowered, const CpuTuning& tuning = {});

}  // namespace kiln
