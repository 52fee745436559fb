// KILN_LOGS: named log channels for the compile path, on stderr. Set from the environment
// (KILN_LOGS=graph_breaks,recompiles or +all) or from code (set_logs("guards")). Lines are short
// and say where: "[kiln:graph_breaks] model.cpp:42: item(): the value is read on the host".
// KILN_DEBUG_DIR=path makes debug_dump() write each captured graph there (text and Graphviz dot).
#pragma once
#include <chrono>
#include <source_location>
#include <string>
#include <string_view>

namespace kiln {

enum class LogChannel { graph_breaks, recompiles, guards, graph, partition, fusion, schedule, output_code, perf, perf_hints, count };
std::string_view name(LogChannel c);

// "graph_breaks,guards", "+all" or "all"; unknown names raise kiln::Error listing the channels.
void set_logs(std::string_view channels);
bool log_enabled(LogChannel c);
void log_line(LogChannel c, const std::string& message);
void log_line(LogChannel c, const std::source_location& where, const std::string& message);
// Milliseconds from t0 to now, for the times log lines quote.
double ms_since(std::chrono::steady_clock::time_point t0);
// "file.cpp:42" (the file's base name).
std::string where_str(const std::source_location& where);

// The debug dump directory (KILN_DEBUG_DIR), or "" when dumping is off.
std::string debug_dir();
void set_debug_dir(std::string path);
// Writes <debug_dir>/<name>.<ext> atomically when dumping is on.
void debug_dump(const std::string& name, const std::string& ext, const std::string& contents);

}  // namespace kiln
