// Tuning regions' schedules (issue 25): the search behind `kiln tune`. While a RegionRecorder
// lives, every region a compiled call runs on its thread is recorded with copies of its inputs
// (the "tasks" of TVM's auto-scheduler, with real inputs rather than random ones: indices stay in
// range). tune_region() then rebuilds one region alone with candidate values of its tunables
// (cpu_tuning.h on the CPU, gpu_row_tuning.h on CUDA), compiles each as the halide backend does
// (so it runs on the same runtime and thread pool as in the model), times it on the recorded
// inputs (the median of repeats after warm-up; on CUDA, waited for) and checks its outputs against kiln's default schedule's: a coordinate descent over the
// directives, one at a time, that keeps a value only when it is faster than the best so far by
// more than the noise measured on the default. Candidates that lower to a schedule already timed
// are not compiled again. The result is a region schedule (region_schedule.h): the directives
// that differ from the defaults, for a record of the tuning database (tuning_db.h) or a file
// `<key>.schedule` in KILN_SCHEDULE_DIR.
//
//   RegionRecorder recorder;
//   f(x);                                          // a compiled call on the halide backend
//   for (const RecordedRegion& r : recorder.regions())
//     TuneResult t = tune_region(r, {.budget_s = 30});
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "schedules/graph_executor.h"

namespace kiln {

struct RecordedRegion {
  std::shared_ptr<const Graph> graph;
  Region region;
  std::string signature;  // region_signature.h: its tuning database record's key
  std::string key;   // region_schedule_key of its signature
  std::string what;  // "a pipeline of 7 ops (...) -> [64, 256]"
  int calls = 0;     // runs of it (or a region of the same signature) while recording
  std::vector<Tensor> inputs;   // copies of its inputs as its first run read them
  std::vector<int32_t> sizes;   // its symbols' values on that run
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  Device device = Device::cpu();  // where it runs: the CPU's tunables, or CUDA's
};

// Records the regions run on this thread while it lives, one entry per signature.
class RegionRecorder {
 public:
  RegionRecorder();
  ~RegionRecorder();
  RegionRecorder(const RegionRecorder&) = delete;
  RegionRecorder& operator=(const RegionRecorder&) = delete;
  const std::vector<RecordedRegion>& regions() const { return regions_; }

 private:
  RegionObserver observer_;
  RegionObserver* saved_ = nullptr;
  std::vector<RecordedRegion> regions_;
};

struct TuneOptions {
  double budget_s = 30;        // seconds for this region's search, compiles included
  double min_gain = 0.02;      // a candidate must beat the best by this fraction, or the noise if larger
};

struct TuneTrial {
  int trial = 0;          // its number among the timed candidates
  double ms = 0;          // its median
  double best_ms = 0;     // the best after it
};

struct TuneResult {
  std::string key, what;
  int calls = 0;
  double default_ms = 0;  // kiln's schedule on this machine
  double tuned_ms = 0;    // the best schedule found (default_ms when none beats it)
  double noise = 0;       // the default's two medians apart, as a fraction
  int trials = 0;         // candidates compiled and timed
  int rejected = 0;       // candidates whose outputs differed from the default's
  std::string schedule;   // the best's directives, one a line (empty: the defaults)
  std::vector<TuneTrial> history;
};

// Builds r with `schedule` (region schedule text) and with kiln's, runs both once on the recorded
// inputs into outputs between guard zones: "" when the schedule stays inside its outputs and
// computes kiln's values, else what went wrong. kiln::Error when it does not build.
std::string check_region_schedule(const RecordedRegion& r, const std::string& schedule);

// `progress` gets a line after each candidate. kiln::Error when the region cannot be built.
TuneResult tune_region(const RecordedRegion& r, const TuneOptions& options,
                       const std::function<void(const std::string&)>& progress = {});

// The file text of a tuned region's schedule: a comment naming the region and the measurement,
// then its directives.
std::string tuned_schedule_text(const TuneResult& t, const std::string& machine);

}  // namespace kiln
