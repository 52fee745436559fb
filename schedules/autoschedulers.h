// Halide's own autoschedulers, selectable for comparison with kiln's schedule
// (CompileOptions::scheduler = "mullapudi2016" | "adams2019" | "li2018"). Each needs estimates of
// every input's and output's sizes (the traced sizes) and is loaded from Debian's plugin directory
// on first use. A failure falls back to kiln's schedule, logged.
#pragma once
#include <string>
#include <vector>

#include "schedules/lower_region.h"

namespace kiln {

std::vector<std::string> halide_autoscheduler_names();

// Schedules the region's pipeline with Halide's autoscheduler `name`; returns the schedule as
// Halide C++ source. Throws kiln::Error when the plugin is missing or the scheduler fails.
std::string apply_halide_autoscheduler(const std::string& name, const Graph& g, const Region& r,
                                       LoweredRegion& lowered, Halide::Pipeline& pipeline);

}  // namespace kiln
