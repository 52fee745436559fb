// Per-row values computed inside the row op that reads them, on CUDA. A stored per-row root
// (a row's mean, its 1/std) is otherwise a kernel of its own that reads the rows from memory
// again; computed in the blocks of the one row op that reads it, its reductions run beside the
// op's own (gpu_schedule.cpp places them; KILN_GPU_ROW_HOST=0 turns this off).
#pragma once
#include <vector>

#include "schedules/region.h"
#include "schedules/schedule_roots.h"

namespace kiln {

// Stored per-row roots that a row op computes in its own rows, in order.
using Hosted = std::vector<const ScheduleRoot*>;

// The stored roots that another root computes in its rows, for each root. A layer norm's backward
// that recomputes its row statistics reads the mean and 1/std at every element of its rows;
// stored at the root, each was a kernel that read the rows from memory again ([8192, 4096]: 3
// kernels, 5 passes over the rows where the gradient needs 3). Root h is hosted by root o when it
// is no output of the region, o reads it, and no root other than o and the roots o hosts does; h
// reduces rows as long as o's into one value per row of o (its dims not always 1 are o's, the
// row aside); and the region computes nothing over its inputs' memory (in_place.h). Only a
// row-wise op run a warp or a block per row places them (schedule_root); others leave them at the
// root.
std::vector<Hosted> hosted_rows(const Graph& g, const Region& r, const std::vector<ScheduleRoot>& roots);

}  // namespace kiln
