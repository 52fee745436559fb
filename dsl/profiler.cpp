#include "dsl/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "dsl/atomic_file.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/cupti_activity.h"
#include "dsl/error.h"
#include "dsl/settings.h"

namespace kiln {

struct Profiler::State {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double stop_us = -1;  // set by stop()
  mutable std::mutex mu;
  std::vector<ProfileEvent> events;
  std::unique_ptr<CuptiActivity> cuda;  // set before the profiler starts, never reset
  std::atomic<uint64_t> next_id{1};     // host event ids, with device activity

  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
};

namespace {

std::atomic<bool> active{false};
std::mutex active_mu;
std::shared_ptr<Profiler::State> active_state;  // under active_mu

int thread_number() {
  static std::atomic<int> next{0};
  thread_local int n = next++;
  return n;
}

std::shared_ptr<Profiler::State> current_state() {
  std::lock_guard<std::mutex> lock(active_mu);
  return active_state;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Whether the process profile records device activity (KILN_PROFILE_CUDA): "auto" where CUPTI
// can record, "1" always (where it cannot, the profile says why and records host events), "0"
// never. Nothing can be thrown before main.
bool process_profile_cuda() {
  std::string mode = setting("KILN_PROFILE_CUDA").value_or("auto");
  if (mode == "0") return false;
  if (mode != "1" && mode != "auto") {
    std::cerr << "kiln: KILN_PROFILE_CUDA must be auto, 0 or 1, got \"" << mode << "\"; recording host events only\n";
    return false;
  }
  std::string why = cupti_unavailable_reason();
  if (why.empty()) return true;
  if (mode == "1") std::cerr << "kiln: KILN_PROFILE_CUDA=1: CUDA activity: " << why << "; recording host events only\n";
  return false;
}

// A profiler for the whole process when KILN_PROFILE names a file: started before main (the
// first use of libkiln), its trace written at exit, after the device has finished its work.
struct ProcessProfile {
  std::string path;
  std::unique_ptr<Profiler> profiler;
  ProcessProfile() {
    std::optional<std::string> p = setting("KILN_PROFILE");
    if (!p) return;
    path = *p;
    try {
      profiler = std::make_unique<Profiler>(ProfilerOptions{.cuda = process_profile_cuda()});
    } catch (const std::exception& e) {
      std::cerr << "kiln: KILN_PROFILE: " << e.what() << "; recording host events only\n";
      profiler = std::make_unique<Profiler>();
    }
  }
  ~ProcessProfile() {
    if (!profiler) return;
    try {
      cuda_synchronize_created();  // the device's last work, before its activity is collected
    } catch (const std::exception& e) {
      std::cerr << "kiln: KILN_PROFILE: " << e.what() << "\n";
    }
    profiler->stop();
    try {
      profiler->save_chrome_trace(path);
      std::cerr << "kiln: profile of " << profiler->events().size() << " events written to " << path << "\n";
    } catch (const std::exception& e) {
      std::cerr << "kiln: KILN_PROFILE: " << e.what() << "\n";
    }
  }
} process_profile;

}  // namespace

bool profiling() { return active.load(std::memory_order_relaxed); }

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

Profiler::Profiler(ProfilerOptions options) : s_(std::make_shared<State>()) {
  std::lock_guard<std::mutex> lock(active_mu);
  KILN_CHECK(!active_state, "Profiler: another profiler is already recording (one at a time; KILN_PROFILE starts "
             "one for the whole process)");
  if (options.cuda) s_->cuda = std::make_unique<CuptiActivity>(s_->start);
  active_state = s_;
  active = true;
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::cerr << "kiln: Profiler: " << e.what() << "\n";
  }
}

void Profiler::stop() {
  {
    std::lock_guard<std::mutex> lock(active_mu);
    if (active_state != s_) return;
    active = false;
    active_state.reset();
    std::lock_guard<std::mutex> events_lock(s_->mu);
    s_->stop_us = s_->now_us();
  }
  if (!s_->cuda) return;
  std::vector<DeviceRecord> records = s_->cuda->stop();
  std::lock_guard<std::mutex> lock(s_->mu);
  for (DeviceRecord& r : records)
    s_->events.push_back({.name = std::move(r.name),
                          .category = std::move(r.kind),
                          .start_us = r.start_us,
                          .duration_us = r.duration_us,
                          .thread = int(r.stream),
                          .args = std::move(r.args),
                          .device = r.device,
                          .launched_by = r.launched_by});
}

bool Profiler::running() const {
  std::lock_guard<std::mutex> lock(active_mu);
  return active_state == s_;
}

std::vector<ProfileEvent> Profiler::events() const {
  std::vector<ProfileEvent> out;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    out = s_->events;
  }
  std::stable_sort(out.begin(), out.end(), [](const ProfileEvent& a, const ProfileEvent& b) {
    return a.start_us < b.start_us || (a.start_us == b.start_us && a.duration_us > b.duration_us);
  });
  return out;
}

double Profiler::window_us() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->stop_us >= 0 ? s_->stop_us : s_->now_us();
}

std::string Profiler::chrome_trace() const {
  const std::vector<ProfileEvent> ev = events();
  const long pid = long(::getpid());
  // A device's events are a process of their own in the trace, its streams the threads.
  constexpr long kDevicePid = 1000000000;
  auto pid_of = [&](const ProfileEvent& e) { return e.device < 0 ? pid : kDevicePid + e.device; };
  std::map<uint64_t, const ProfileEvent*> host_of_id;
  std::set<std::pair<int, int>> streams;  // (device, stream)
  for (const ProfileEvent& e : ev) {
    if (e.id) host_of_id[e.id] = &e;
    if (e.device >= 0) streams.insert({e.device, e.thread});
  }
  std::ostringstream os;
  os << "{\"traceEvents\": [\n";
  bool first = true;
  auto begin_event = [&] {
    os << (first ? "" : ",\n");
    first = false;
  };
  for (const ProfileEvent& e : ev) {
    begin_event();
    os << "{\"name\": " << json_quote(e.name) << ", \"cat\": " << json_quote(e.category)
       << ", \"ph\": \"X\", \"ts\": " << fixed(e.start_us, 3) << ", \"dur\": " << fixed(e.duration_us, 3)
       << ", \"pid\": " << pid_of(e) << ", \"tid\": " << e.thread << ", \"args\": {" << e.args << "}}";
  }
  // Names for the device processes and their streams, and an arrow from each launching host event
  // to what it launched (flow events: "s" inside the host slice, "f" bound to the device slice).
  int previous_device = -1;
  for (auto [device, stream] : streams) {
    if (device != previous_device) {
      begin_event();
      os << "{\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " << kDevicePid + device
         << ", \"tid\": 0, \"args\": {\"name\": \"CUDA device " << device << "\"}}";
      previous_device = device;
    }
    begin_event();
    os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " << kDevicePid + device
       << ", \"tid\": " << stream << ", \"args\": {\"name\": \"stream " << stream << "\"}}";
  }
  uint64_t flow = 0;
  for (const ProfileEvent& e : ev) {
    auto host = e.launched_by ? host_of_id.find(e.launched_by) : host_of_id.end();
    if (host == host_of_id.end()) continue;
    const ProfileEvent& h = *host->second;
    ++flow;
    begin_event();
    os << "{\"name\": \"launch\", \"cat\": \"launch\", \"ph\": \"s\", \"id\": " << flow
       << ", \"ts\": " << fixed(h.start_us, 3) << ", \"pid\": " << pid << ", \"tid\": " << h.thread << "},\n";
    os << "{\"name\": \"launch\", \"cat\": \"launch\", \"ph\": \"f\", \"bp\": \"e\", \"id\": " << flow
       << ", \"ts\": " << fixed(e.start_us, 3) << ", \"pid\": " << pid_of(e) << ", \"tid\": " << e.thread << "}";
  }
  os << "\n], \"displayTimeUnit\": \"ms\"}\n";
  return os.str();
}

void Profiler::save_chrome_trace(const std::string& path) const {
  std::string text = chrome_trace();
  write_file_atomic("Profiler.save_chrome_trace", path, {{text.data(), text.size()}});
}

std::string Profiler::table(size_t max_rows) const {
  std::vector<ProfileEvent> ev = events();
  // Self time: each event's duration less that of the events nested directly inside it (same
  // thread, inside its interval), found with a stack per thread over the events by start time.
  std::vector<double> self(ev.size());
  std::map<std::pair<int, int>, std::vector<size_t>> open;  // by (device, thread)
  std::map<uint64_t, double> launched_us;                    // device time by launching host event
  bool device_events = false;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].device >= 0) {
      device_events = true;
      if (ev[i].launched_by) launched_us[ev[i].launched_by] += ev[i].duration_us;
    }
    self[i] = ev[i].duration_us;
    std::vector<size_t>& stack = open[{ev[i].device, ev[i].thread}];
    while (!stack.empty() && ev[stack.back()].start_us + ev[stack.back()].duration_us <= ev[i].start_us)
      stack.pop_back();
    if (!stack.empty()) self[stack.back()] -= ev[i].duration_us;
    stack.push_back(i);
  }
  struct Row {
    std::string category, name;
    int64_t calls = 0;
    double total = 0, self = 0, launched = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (size_t i = 0; i < ev.size(); ++i) {
    Row& r = rows[{ev[i].category, ev[i].name}];
    r.category = ev[i].category;
    r.name = ev[i].name;
    ++r.calls;
    r.total += ev[i].duration_us;
    r.self += std::max(0.0, self[i]);
    if (ev[i].id)
      if (auto it = launched_us.find(ev[i].id); it != launched_us.end()) r.launched += it->second;
  }
  std::vector<Row> sorted;
  for (auto& [key, r] : rows) sorted.push_back(r);
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.self > b.self; });
  double window = window_us();
  std::ostringstream os;
  std::set<int> threads;
  size_t host_events = 0;
  for (const ProfileEvent& e : ev)
    if (e.device < 0) {
      threads.insert(e.thread);
      ++host_events;
    }
  os << "profile: " << host_events << " host events in " << fixed(window / 1e3, 3) << " ms";
  if (threads.size() > 1)
    os << " on " << threads.size() << " threads (their shares of the window add up past 100% where they overlap)";
  if (device_events)
    os << "; " << ev.size() - host_events << " device events (kernel, memcpy, memset: device times; \"device ms\": "
       << "the device time of what a host group launched itself)";
  os << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-14s %-44s %8s %12s %12s %10s %7s%s\n", "category", "name", "calls", "total ms",
                "self ms", "avg us", "self %", device_events ? "    device ms" : "");
  os << line;
  for (size_t i = 0; i < sorted.size() && i < max_rows; ++i) {
    const Row& r = sorted[i];
    std::string name = r.name.size() > 44 ? r.name.substr(0, 41) + "..." : r.name;
    std::snprintf(line, sizeof line, "  %-14s %-44s %8lld %12.3f %12.3f %10.1f %6.1f%%", r.category.c_str(),
                  name.c_str(), static_cast<long long>(r.calls), r.total / 1e3, r.self / 1e3, r.total / double(r.calls),
                  window > 0 ? 100 * r.self / window : 0.0);
    os << line;
    if (device_events) {
      std::snprintf(line, sizeof line, " %12.3f", r.launched / 1e3);
      os << line;
    }
    os << "\n";
  }
  if (sorted.size() > max_rows) os << "  ... " << sorted.size() - max_rows << " more\n";
  return os.str();
}

namespace {
thread_local PhaseSeconds* phase_sink = nullptr;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

CompilePhaseSink::CompilePhaseSink(PhaseSeconds* sink) : saved_(phase_sink) { phase_sink = sink; }
CompilePhaseSink::~CompilePhaseSink() { phase_sink = saved_; }
PhaseSeconds* CompilePhaseSink::current() { return phase_sink; }

CompilePhase::CompilePhase(std::string_view name, std::string args)
    : name_(name), start_s_(steady_seconds()), record_(name, "compile_phase", [&] { return std::move(args); }) {}

CompilePhase::~CompilePhase() {
  if (!phase_sink) return;
  double s = steady_seconds() - start_s_;
  std::lock_guard<std::mutex> lock(phase_sink->mu);
  phase_sink->seconds[name_] += s;
}

void RecordFunction::begin(std::string_view name, std::string_view category, std::string args) {
  state_ = current_state();
  if (!state_) return;
  event_.name = name;
  event_.category = category;
  event_.args = std::move(args);
  event_.thread = thread_number();
  if (state_->cuda) {
    event_.id = state_->next_id++;
    launch_scope_ = cupti_push_launch_scope(event_.id);
  }
  event_.start_us = state_->now_us();
}

void RecordFunction::end() {
  event_.duration_us = std::max(0.0, state_->now_us() - event_.start_us);
  if (launch_scope_) cupti_pop_launch_scope();
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->stop_us >= 0) return;  // stopped meanwhile
  state_->events.push_back(std::move(event_));
}

}  // namespace kiln
