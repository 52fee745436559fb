#include "schedules/tuning_db.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "dsl/atomic_file.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/eager/matmul.h"
#include "dsl/error.h"
#include "dsl/fnv_hash.h"
#include "dsl/settings.h"
#include "graph/logs.h"
#include "schedules/codegen_version.h"  // generated: KILN_CODEGEN_VERSION (kiln, Halide)
#include "schedules/disk_cache.h"

namespace kiln {

namespace {

struct Override {
  std::mutex mu;
  std::optional<std::optional<std::string>> dir;  // set: a TuningDbScope's folder, or off
};

Override& override_state() {
  static Override s;
  return s;
}

// One warning per record file and process.
void warn_once(const std::string& path, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(path).second)
    std::cerr << "kiln: warning: tuning database: " << path << ": " << why << "; skipped\n";
}

const char* const kHeader = "# kiln tuning record (schedules/tuning_db.h)";

}  // namespace

std::string tuning_db_dir() {
  {
    Override& o = override_state();
    std::lock_guard<std::mutex> lock(o.mu);
    if (o.dir) return o.dir->value_or("");
  }
  if (std::optional<std::string> d = setting("KILN_TUNING_DB")) return *d;
  return (std::filesystem::path(disk_cache_dir()) / "tuning").string();
}

std::string tuning_versions() { return KILN_CODEGEN_VERSION; }

std::string tuning_device_name(Device d) {
  if (d.is_cuda()) return cuda_context(d.index).name;
  // Read once: compile() asks it for every region it looks up.
  static const std::string cpu = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, name = "an unknown CPU";
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0) {
        name = line.substr(line.find(':') + 2);
        break;
      }
    return name + " (" + std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " threads)";
  }();
  return cpu;
}

std::string tuning_record_text(const TuningRecord& r) {
  std::string body = r.body, key = r.key;
  if (!body.empty() && body.back() != '\n') body += '\n';
  if (!key.empty() && key.back() != '\n') key += '\n';
  return std::string(kHeader) + "\nkind " + r.kind + "\ndevice " + r.device + "\nversions " + r.versions +
         "\n[body]\n" + body + "[key]\n" + key;
}

TuningRecord parse_tuning_record(const std::string& text, const std::string& where) {
  TuningRecord r;
  std::istringstream in(text);
  std::string line;
  KILN_CHECK(std::getline(in, line) && line == kHeader, "tuning record ", where, ": not a kiln tuning record (its first line is not '",
             kHeader, "')");
  for (const char* field : {"kind", "device", "versions"}) {
    KILN_CHECK(std::getline(in, line) && line.rfind(std::string(field) + " ", 0) == 0, "tuning record ", where,
               ": expected the line '", field, " ...', got '", line, "'");
    std::string value = line.substr(std::string(field).size() + 1);
    (field[0] == 'k' ? r.kind : field[0] == 'd' ? r.device : r.versions) = value;
  }
  KILN_CHECK(std::getline(in, line) && line == "[body]", "tuning record ", where, ": expected '[body]', got '", line, "'");
  bool key = false;
  while (std::getline(in, line)) {
    if (!key && line == "[key]") {
      key = true;
      continue;
    }
    (key ? r.key : r.body) += line + "\n";
  }
  // A record cut short loses its key's end, or all of it: the text must end where a whole one does.
  KILN_CHECK(key && !text.empty() && text.back() == '\n', "tuning record ", where, ": cut short (no '[key]' section, or no final newline)");
  if (!r.key.empty()) r.key.pop_back();
  return r;
}

std::string tuning_record_path(const std::string& kind, const std::string& key, const std::string& device) {
  return (std::filesystem::path(tuning_db_dir()) / (kind + "-" + fnv1a_hex(key + "\n" + device) + ".record")).string();
}

std::string write_tuning_record(const std::string& kind, const std::string& key, const std::string& device,
                                const std::string& body) {
  std::string dir = tuning_db_dir();
  KILN_CHECK(!dir.empty(), "tuning database: off here (a TuningDbScope turned it off); nothing written");
  TuningRecord r{.kind = kind, .key = key, .device = device, .versions = tuning_versions(), .body = body};
  std::string path = tuning_record_path(r.kind, r.key, r.device);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string text = tuning_record_text(r);
  write_file_atomic("tuning database", path, {{text.data(), text.size()}});
  return path;
}

std::optional<TuningRecord> find_tuning_record(const std::string& kind, const std::string& key,
                                               const std::string& device, bool warn_stale) {
  if (tuning_db_dir().empty()) return std::nullopt;
  std::string path = tuning_record_path(kind, key, device);
  std::optional<std::string> text = read_file(path);
  if (!text) return std::nullopt;
  TuningRecord r;
  try {
    r = parse_tuning_record(*text, path);
  } catch (const Error& e) {
    warn_once(path, e.what());
    return std::nullopt;
  }
  if (r.versions != tuning_versions()) {
    if (warn_stale)
      warn_once(path, "made by another kiln or Halide (" + r.versions + "; this one is " + tuning_versions() +
                        "); run kiln tune again");
    return std::nullopt;
  }
  // A file named for this record that holds another one (a hash collision, a copied file).
  if (r.kind != kind || r.key != key || r.device != device) return std::nullopt;
  return r;
}

std::optional<GemmChoice> machine_gemm_choice_from_db() {
  if (tuning_db_dir().empty()) return std::nullopt;
  std::string device = tuning_device_name(Device::cpu());
  if (std::optional<TuningRecord> r = find_tuning_record("gemm", "f32", device, false)) {
    std::string path = tuning_record_path("gemm", "f32", device);
    try {
      return GemmChoice::parse(r->body, path);
    } catch (const Error& e) {
      warn_once(path, e.what());
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  GemmChoice c = measure_gemm_choice();
  std::string where;
  try {
    where = "; kept in " + write_tuning_record("gemm", "f32", device, c.text());
  } catch (const Error& e) {
    where = std::string("; not kept: ") + e.what();
  }
  log_line(LogChannel::schedule, "eager GEMM: Halide against Eigen measured on " + device + " in " +
                                     std::to_string(int(ms_since(t0))) + " ms" + where + "\n" + c.text());
  return c;
}

TuningDbScope::TuningDbScope(std::optional<std::string> dir) {
  Override& o = override_state();
  std::lock_guard<std::mutex> lock(o.mu);
  saved_ = o.dir;
  o.dir = std::move(dir);
}

TuningDbScope::~TuningDbScope() {
  Override& o = override_state();
  std::lock_guard<std::mutex> lock(o.mu);
  o.dir = saved_;
}

}  // namespace kiln

// Referenced by the kiln target's link options, so the linker keeps this file and the eager GEMM
// asks the database before main().
extern "C" {
int kiln_tuning_db_registered = [] {
  kiln::set_gemm_choice_source(kiln::machine_gemm_choice_from_db);
  return 1;
}();
}
