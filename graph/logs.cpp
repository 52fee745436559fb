#include "graph/logs.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "dsl/atomic_file.h"
#include "dsl/error.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

constexpr int kChannels = int(LogChannel::count);

struct LogState {
  std::array<std::atomic<bool>, kChannels> on{};
  std::mutex mu;  // one line at a time; guards dir
  std::string dir;
  LogState() {
    if (std::optional<std::string> e = setting("KILN_LOGS")) set(*e);
    if (std::optional<std::string> d = setting("KILN_DEBUG_DIR")) dir = *d;
  }
  void set(std::string_view list) {
    std::array<bool, kChannels> next{};
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (!item.empty() && item[0] == '+') item.remove_prefix(1);
      if (item.empty()) continue;
      if (item == "all") {
        next.fill(true);
        continue;
      }
      bool found = false;
      for (int c = 0; c < kChannels; ++c)
        if (name(LogChannel(c)) == item) next[c] = found = true;
      if (!found) {
        std::string known;
        for (int c = 0; c < kChannels; ++c) known += (c ? ", " : "") + std::string(name(LogChannel(c)));
        throw_error("KILN_LOGS: unknown channel '", item, "' (channels: ", known, ", all)");
      }
    }
    for (int c = 0; c < kChannels; ++c) on[c] = next[c];
  }
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

std::string_view name(LogChannel c) {
  switch (c) {
    case LogChannel::graph_breaks: return "graph_breaks";
    case LogChannel::recompiles: return "recompiles";
    case LogChannel::guards: return "guards";
    case LogChannel::graph: return "graph";
    case LogChannel::partition: return "partition";
    case LogChannel::fusion: return "fusion";
    case LogChannel::schedule: return "schedule";
    case LogChannel::output_code: return "output_code";
    case LogChannel::perf: return "perf";
    case LogChannel::perf_hints: return "perf_hints";
    case LogChannel::count: break;
  }
  return "?";
}

void set_logs(std::string_view channels) { state().set(channels); }
bool log_enabled(LogChannel c) { return state().on[int(c)].load(std::memory_order_relaxed); }

void log_line(LogChannel c, const std::string& message) {
  if (!log_enabled(c)) return;
  std::lock_guard<std::mutex> lock(state().mu);
  std::cerr << "[kiln:" << name(c) << "] " << message << '\n';
}

void log_line(LogChannel c, const std::source_location& where, const std::string& message) {
  if (log_enabled(c)) log_line(c, where_str(where) + ": " + message);
}

std::string where_str(const std::source_location& where) {
  if (!where.file_name() || !*where.file_name()) return "<unknown>";
  return std::filesystem::path(where.file_name()).filename().string() + ":" + std::to_string(where.line());
}

std::string debug_dir() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().dir;
}

void set_debug_dir(std::string path) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().dir = std::move(path);
}

void debug_dump(const std::string& name, const std::string& ext, const std::string& contents) {
  std::string dir = debug_dir();
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  write_file_atomic("KILN_DEBUG_DIR", dir + "/" + name + "." + ext, {{contents.data(), contents.size()}});
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kiln
