#include "schedules/disk_cache.h"

#include <Halide.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include "dsl/atomic_file.h"
#include "dsl/error.h"
#include "dsl/fnv_hash.h"
#include "graph/logs.h"
#include "schedules/codegen_version.h"  // generated: KILN_CODEGEN_VERSION (kiln, Halide)
#include "dsl/settings.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'C', '0', '1'};

struct Trailer {
  uint64_t length;
  uint64_t checksum;
  char magic[8];
};

// What code set over the environment (set_disk_cache_enabled, set_disk_cache_dir), and the statistics.
struct Overrides {
  std::mutex mu;
  DiskCacheStats stats;
  std::optional<bool> enabled;
  std::optional<std::string> dir;
};

Overrides& overrides() {
  static Overrides s;
  return s;
}

// 8 bytes at a time, each mixed by a multiply and a rotate: fast enough for megabytes per load.
uint64_t checksum(const std::string& bytes) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ bytes.size();
  size_t n = bytes.size() / 8;
  for (size_t i = 0; i < n; ++i) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + 8 * i, 8);
    h = (h ^ (w * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
    h = (h << 27) | (h >> 37);
  }
  for (size_t i = 8 * n; i < bytes.size(); ++i) h = (h ^ uint8_t(bytes[i])) * 0x100000001b3ull;
  return h ^ (h >> 33);
}

std::string entry_path(const std::string& key, const std::string& ext) {
  return disk_cache_dir() + "/halide/" + key + ext;
}

// Keeps the cache under KILN_CACHE_MAX_MB (default 2048) after each write: the least recently
// used entries go first (a hit refreshes an entry's time), never `keep` (just written, about to be
// loaded). A write follows a compile of 0.1 s or more, so the scan of the folder is cheap beside it.
void evict_old_entries(const std::filesystem::path& dir, const std::filesystem::path& keep) {
  uint64_t limit = uint64_t(int_setting("KILN_CACHE_MAX_MB", 2048, 0, int64_t(1) << 40)) << 20;
  struct Entry {
    std::filesystem::file_time_type time;
    uint64_t size;
    std::filesystem::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec) || e.path().filename().string()[0] == '.') continue;
    total += e.file_size(ec);
    if (e.path() != keep) entries.push_back({e.last_write_time(ec), e.file_size(ec), e.path()});
  }
  if (total <= limit) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  int removed = 0;
  for (const Entry& e : entries) {
    if (total <= limit * 8 / 10) break;
    if (std::filesystem::remove(e.path, ec)) total -= e.size, ++removed;
  }
  log_line(LogChannel::output_code, "disk cache: over " + std::to_string(limit >> 20) + " MiB; removed the " +
                                        std::to_string(removed) + " least recently used entries");
}

}  // namespace

bool disk_cache_enabled() {
  std::lock_guard<std::mutex> lock(overrides().mu);
  if (overrides().enabled) return *overrides().enabled;
  return flag_setting("KILN_CACHE", true);
}

void set_disk_cache_enabled(bool on) {
  std::lock_guard<std::mutex> lock(overrides().mu);
  overrides().enabled = on;
}

std::string disk_cache_dir() {
  std::lock_guard<std::mutex> lock(overrides().mu);
  if (overrides().dir) return *overrides().dir;
  if (std::optional<std::string> d = setting("KILN_CACHE_DIR")) return *d;
  if (std::optional<std::string> x = setting("XDG_CACHE_HOME")) return *x + "/kiln";
  if (std::optional<std::string> h = setting("HOME")) return *h + "/.cache/kiln";
  return (std::filesystem::temp_directory_path() / "kiln-cache").string();
}

void set_disk_cache_dir(std::string dir) {
  std::lock_guard<std::mutex> lock(overrides().mu);
  overrides().dir = std::move(dir);
}

DiskCacheStats disk_cache_stats() {
  std::lock_guard<std::mutex> lock(overrides().mu);
  return overrides().stats;
}

namespace {
void count(int64_t DiskCacheStats::*field) {
  std::lock_guard<std::mutex> lock(overrides().mu);
  ++(overrides().stats.*field);
}
}  // namespace

std::string cache_key(const std::vector<std::string>& parts) {
  uint64_t a = kFnvOffset, b = 0x84222325cbf29ce4ull;
  auto add = [&](const std::string& s) {
    a = fnv1a(s, a), b = fnv1a(s, b);
    a = fnv1a("\x1f", a), b = fnv1a("\x1e", b);
  };
  add(KILN_CODEGEN_VERSION);
  for (const std::string& p : parts) add(p);
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return out;
}

std::string find_cache_entry(const std::string& key, const std::string& ext) {
  std::string path = entry_path(key, ext);
  std::optional<std::string> bytes = read_file(path);
  if (!bytes) {
    count(&DiskCacheStats::misses);
    return "";
  }
  Trailer t{};
  bool ok = bytes->size() >= sizeof(Trailer);
  if (ok) {
    std::memcpy(&t, bytes->data() + bytes->size() - sizeof(Trailer), sizeof(Trailer));
    bytes->resize(bytes->size() - sizeof(Trailer));
    ok = std::memcmp(t.magic, kMagic, sizeof kMagic) == 0 && t.length == bytes->size() && t.checksum == checksum(*bytes);
  }
  if (ok) {
    count(&DiskCacheStats::hits);
    std::error_code ec;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);  // recently used
    return path;
  }
  count(&DiskCacheStats::corrupt);
  log_line(LogChannel::output_code, "disk cache: " + path + " is corrupt (truncated or its checksum differs); "
                                    "it is removed and recompiled");
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return "";
}

void remove_cache_entry(const std::string& key, const std::string& ext) {
  std::error_code ec;
  std::filesystem::remove(entry_path(key, ext), ec);
}

std::string store_cache_entry(const std::string& key, const std::string& ext, const std::string& payload) {
  std::optional<std::string> bytes = read_file(payload);
  KILN_CHECK(bytes.has_value(), "disk cache: cannot read the built file '", payload, "'");
  Trailer t{bytes->size(), checksum(*bytes), {}};
  std::memcpy(t.magic, kMagic, sizeof kMagic);
  std::string path = entry_path(key, ext);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  KILN_CHECK(!ec, "disk cache: cannot create '", std::filesystem::path(path).parent_path().string(), "': ",
             ec.message(), " (set KILN_CACHE_DIR to a writable folder, or KILN_CACHE=0)");
  write_file_atomic("disk cache", path, {{bytes->data(), bytes->size()}, {&t, sizeof t}});
  count(&DiskCacheStats::writes);
  evict_old_entries(std::filesystem::path(path).parent_path(), path);
  return path;
}

}  // namespace kiln
