// The profiler: host events of everything kiln does and, on CUDA, every kernel, copy and memset
// with its device time, as a Chrome trace (opens in Perfetto and chrome://tracing) and as a table
// grouped by name, like PyTorch's profiler and key_averages().
//
//   Profiler p({.cuda = true});                  // records from here
//   { RecordFunction r("my step"); step(); }     // a scope of the user's own
//   cuda_synchronize();
//   p.stop();
//   p.save_chrome_trace("trace.json");
//   std::cout << p.table();
//
// KILN_PROFILE=trace.json profiles a whole process and writes the trace at its exit, with CUDA
// activity where CUPTI can record it (KILN_PROFILE_CUDA: auto, 1 or 0).
//
// What records itself, by category: "op" (each eager op, with its inputs' shapes and dtypes),
// "backward" (each node of autograd's backward), "optimizer" (each optimizer step),
// "compiled_call" (each call of a compiled function), "compile" (a trace and each graph's
// compile) and "compile_phase" (each graph pass, the partition, each region's lowering,
// scheduling and code generation, disk-cache loads), "region" and "eager_step" (the steps of a
// compiled graph as they run), "user" (RecordFunction). Host times cover the work and, on CUDA,
// the launches. With `.cuda`, CUPTI (dsl/cuda/cupti_activity.h) adds device events: "kernel",
// "memcpy" and "memset", with device timestamps on the host's clock, each linked to the innermost
// host event open when it was launched (`launched_by`; an arrow in the trace). Stop after the
// device has finished (a synchronize): later activity is not recorded.
//
// One profiler records at a time (a second gives kiln::Error). Events of every thread are kept;
// when no profiler runs, each instrumented point costs one atomic load.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct ProfileEvent {
  std::string name;
  std::string category;
  double start_us = 0;     // from the profiler's start, host steady clock
  double duration_us = 0;  // >= 0
  int thread = 0;          // a small number per thread, in order of first event
  std::string args;        // members of the Chrome trace's "args" object, as JSON ("" for none)
  int device = -1;         // a device event's CUDA device (thread: its stream); -1 for host events
  uint64_t id = 0;         // a host event's id when device activity is recorded (else 0)
  uint64_t launched_by = 0;  // a device event's launching host event (its id; 0: none recorded)
};

struct ProfilerOptions {
  bool cuda = false;  // record device activity through CUPTI (kiln::Error where it cannot)
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();  // stops if still running
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  void stop();
  bool running() const;
  // The events so far (a copy; by start time); device events once stopped.
  std::vector<ProfileEvent> events() const;
  // Microseconds from the start to stop() (or to now, while running).
  double window_us() const;
  // The trace as Chrome's JSON: {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid",
  // "tid", "args"}, ...], "displayTimeUnit": "ms"}.
  std::string chrome_trace() const;
  void save_chrome_trace(const std::string& path) const;  // written atomically
  // Events grouped by category and name, the costliest self time first: calls, total, self
  // (total less the events nested directly inside), average, self as a share of the window, and,
  // with device activity, the device time of what each group launched itself (not its nested
  // events). Device events are rows of their own (categories kernel, memcpy, memset).
  std::string table(size_t max_rows = 40) const;

  struct State;

 private:
  std::shared_ptr<State> s_;
};

// Whether a profiler records now.
bool profiling();

// Records the time of its scope as an event. `args` (a callable returning the members of the
// event's "args" object as JSON) is only called while a profiler records.
class RecordFunction {
 public:
  explicit RecordFunction(std::string_view name, std::string_view category = "user") {
    if (profiling()) begin(name, category, {});
  }
  template <class Args>
  RecordFunction(std::string_view name, std::string_view category, Args&& args) {
    if (profiling()) begin(name, category, args());
  }
  ~RecordFunction() {
    if (state_) end();
  }
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  void begin(std::string_view name, std::string_view category, std::string args);
  void end();

  std::shared_ptr<Profiler::State> state_;
  ProfileEvent event_;
  bool launch_scope_ = false;  // a CUPTI launch scope was pushed for this event
};

// Where a compile's phases add up their seconds (CompileStats::phase_s): installed on a thread by
// CompilePhaseSink's scope; threads that a compile starts pass it on (CompilePhaseSink::current()).
struct PhaseSeconds {
  std::mutex mu;
  std::map<std::string, double> seconds;  // by phase name; worker threads' phases add up
};

class CompilePhaseSink {
 public:
  explicit CompilePhaseSink(PhaseSeconds* sink);
  ~CompilePhaseSink();
  CompilePhaseSink(const CompilePhaseSink&) = delete;
  CompilePhaseSink& operator=(const CompilePhaseSink&) = delete;
  static PhaseSeconds* current();

 private:
  PhaseSeconds* saved_;
};

// One phase of a compile: a "compile_phase" profiler event, and its seconds added to the
// thread's PhaseSeconds when one is installed. Always timed (phases take milliseconds).
class CompilePhase {
 public:
  explicit CompilePhase(std::string_view name, std::string args = {});
  ~CompilePhase();
  CompilePhase(const CompilePhase&) = delete;
  CompilePhase& operator=(const CompilePhase&) = delete;

 private:
  std::string name_;
  double start_s_;
  RecordFunction record_;
};

// JSON string literal of s (quotes and escapes), for RecordFunction's args.
std::string json_quote(std::string_view s);

}  // namespace kiln
