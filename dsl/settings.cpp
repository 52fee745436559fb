#include "dsl/settings.h"

#include <algorithm>
#include <cstdlib>

#include "dsl/error.h"

namespace kiln {

const std::vector<SettingInfo>& settings() {
  static const std::vector<SettingInfo> table = {
      {"KILN_LOGS", "none",
       "log channels of the compile path on stderr, comma-separated (graph_breaks, recompiles, guards, graph, "
       "partition, fusion, schedule, output_code, perf, perf_hints; all or +all for every one); graph/logs.h"},
      {"KILN_DEBUG_DIR", "none",
       "a folder that receives every captured and optimized graph (text, dot), each fusion plan and each "
       "region's schedule, stmt and assembly"},
      {"KILN_BACKEND", "eager", "the backend of compile() when CompileOptions::backend is empty (eager, halide)"},
      {"KILN_CUDA_GRAPHS", "0", "1 replays every compiled call on CUDA as a CUDA graph (as compile's mode \"reduce-overhead\"); graph/cuda_graphs.h"},
      {"KILN_CHECK_INDICES", "0",
       "1 checks the indices of embedding and the targets of cross_entropy on CUDA tensors on the host too (each "
       "call waits for the device; for debugging): an index out of range is a kiln::Error, where the kernels "
       "otherwise clamp it"},
      {"KILN_PROFILE", "none", "a file: the whole process is profiled and its Chrome trace written there at exit"},
      {"KILN_PROFILE_CUDA", "auto",
       "with KILN_PROFILE, CUDA kernels and copies too (CUPTI): auto where CUPTI can record, 1 always (else says why), 0 never"},
      {"KILN_CACHE", "1", "0 turns the disk cache of compiled pipelines off (CPU graphs are then JIT-compiled)"},
      {"KILN_CACHE_DIR", "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln", "the disk cache's folder"},
      {"KILN_CACHE_MAX_MB", "2048", "the disk cache's size cap; least recently used entries go first"},
      {"KILN_COMPILE_THREADS", "one per core", "threads that compile one graph's regions side by side"},
      {"KILN_CPU_CACHE_MB", "2048", "memory the CPU caching allocator keeps for reuse"},
      {"KILN_CUDA_CACHE_MB", "no cap", "memory the CUDA caching allocator keeps for reuse, per device"},
      {"HL_NUM_THREADS", "one per core",
       "Halide's thread pool size (its own setting); kiln's CPU kernels and the Eigen GEMM use as many"},
      {"XDG_CACHE_HOME", "unset", "the disk cache goes to $XDG_CACHE_HOME/kiln when KILN_CACHE_DIR is unset"},
      {"HOME", "the user's", "else to ~/.cache/kiln"},
      {"CC", "cc", "the C compiler that links compiled pipelines into the disk cache's shared libraries"},
      // The GPU row schedule's tunables, for schedule experiments (schedules/gpu_schedule.h); their
      // values are part of the disk cache's key of CUDA graphs.
      {"KILN_SCHEDULE_DIR", "none",
       "a folder of region schedules: <key>.schedule sets one region's tunables: a CUDA region's row and column "
       "ones (the KILN_GPU_ROW_* and _COLUMN_* settings for that region alone), a CPU region's cpu.* ones; a file "
       "wins over the tuning database's record; KILN_LOGS=schedule prints each region's key; "
       "schedules/region_schedule.h"},
      {"KILN_TUNING_DB", "the kiln cache's tuning/",
       "the tuning database's folder: `kiln tune`'s region schedules and this machine's measured eager GEMM "
       "choice, one record a file, applied only on the device and kiln version that made them; "
       "schedules/tuning_db.h"},
      {"KILN_GPU_ROW_THREADS", "256", "GPU row schedule: threads per block (32-1024)"},
      {"KILN_GPU_ROW_STAGE", "0", "GPU row schedule: 1 stages the rows a block reads several times in shared memory"},
      {"KILN_GPU_ROW_REGISTERS", "1", "GPU row schedule: 0 keeps no row in registers (a warp row staged in its lanes, a block row of at most 16 steps a thread unrolled in every pass)"},
      {"KILN_GPU_ROW_HOST", "1",
       "GPU row schedule: 0 computes per-row values that one row op reads (a recomputed mean and 1/std) in kernels of their own"},
      {"KILN_GPU_ROW_VECTOR", "0", "GPU row schedule: 1 gives each thread 4 consecutive elements"},
      {"KILN_GPU_ROW_WARP", "-1", "GPU row schedule: 1 a warp per row always, 0 never, -1 by the rows' count and length"},
      {"KILN_GPU_ROW_UNROLL", "8", "GPU row schedule: a row reduction's serial steps unrolled (1-16; a block row kept in registers unrolls all of its steps)"},
      {"KILN_GPU_WARP_ROWS", "0", "GPU row schedule: rows per block of a warp-row op (1-32; 0: by the row length)"},
      {"KILN_GPU_ROW_WIDTH", "0",
       "GPU row schedule: lanes per row of rows of at most 64 elements (a power of two up to 32; 0: by the length)"},
      {"KILN_GPU_COLUMN_THREADS", "131072",
       "GPU column reduction: threads its chunks of rows are sized for, when few columns are kept (1024-2^24)"},
      {"KILN_GPU_COLUMN_CHUNK_MAX", "256", "GPU column reduction: rows per chunk, at most (32-65536)"},
      {"KILN_GPU_COLUMN_UNROLL", "16", "GPU column reduction: a thread's serial sum unrolled (1-16)"},
      {"KILN_GPU_WARP_COMBINE_SERIAL", "0",
       "GPU row schedule: 1 combines a warp row's lane sums one at a time instead of shuffled as a vector"},
      {"RANK", "none", "distributed: this process's rank (0 to WORLD_SIZE - 1); set by `kiln run` or torchrun"},
      {"WORLD_SIZE", "none", "distributed: the number of processes of the job"},
      {"LOCAL_RANK", "RANK", "distributed: this process's index on its host (its CUDA device)"},
      {"MASTER_ADDR", "127.0.0.1", "distributed: the host of rank 0's rendezvous store"},
      {"MASTER_PORT", "none", "distributed: the TCP port of rank 0's rendezvous store"},
      {"KILN_DIST_TIMEOUT_S", "300",
       "distributed: seconds a rendezvous or collective waits for the other ranks before it is a kiln::Error"},
  };
  return table;
}

namespace {

const SettingInfo& info(std::string_view name) {
  for (const SettingInfo& s : settings())
    if (s.name == name) return s;
  throw_error("settings: ", name, " is not a setting kiln reads (every one is in the table of dsl/settings.cpp)");
}

}  // namespace

std::optional<std::string> setting(std::string_view name) {
  const SettingInfo& s = info(name);
  const char* v = std::getenv(std::string(s.name).c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

int64_t int_setting(std::string_view name, int64_t fallback, int64_t lo, int64_t hi) {
  std::optional<std::string> v = setting(name);
  if (!v) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v->c_str(), &end, 10);
  KILN_CHECK(end && *end == 0 && n >= lo && n <= hi, name, ": expected a whole number from ", lo, " to ", hi, ", got '",
             *v, "'");
  return int64_t(n);
}

bool flag_setting(std::string_view name, bool fallback) {
  std::optional<std::string> v = setting(name);
  if (!v) return fallback;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  throw_error(name, ": expected 1 or 0 (true/false, on/off, yes/no), got '", *v, "'");
}

namespace {

// `text` in lines of at most `width` characters, each after `indent` spaces.
std::string wrapped(std::string_view text, size_t width, size_t indent) {
  std::string out, line;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(i, end - i);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + std::string(word);
    i = end + 1;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  return out;
}

}  // namespace

std::string settings_text() {
  std::string out;
  for (const SettingInfo& s : settings()) {
    std::optional<std::string> v = setting(s.name);
    out += std::string(s.name) + " (default: " + std::string(s.fallback) + (v ? "; set here: " + *v : "") + ")\n" +
           wrapped(s.what, 92, 4);
  }
  return out;
}

}  // namespace kiln
