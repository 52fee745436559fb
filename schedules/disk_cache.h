// The disk cache of compiled code (default ~/.cache/kiln; KILN_CACHE_DIR moves it, KILN_CACHE=0
// turns it off). An entry is one file named by its key: the payload (a shared library) followed by
// a trailer holding the payload's length and checksum. Entries are written atomically (temporary
// file, then rename), so processes can share the cache; an entry whose trailer does not match is
// corrupt: it is removed and reported as missing, never loaded. The cache stays under
// KILN_CACHE_MAX_MB (default 2048) by removing the least recently used entries.
//
//   std::string key = cache_key({graph_text, target, "kiln-schedule"});
//   std::string path = find_cache_entry(key, ".so");
//   if (path.empty()) path = store_cache_entry(key, ".so", built_library_path);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

bool disk_cache_enabled();
void set_disk_cache_enabled(bool on);  // overrides KILN_CACHE
std::string disk_cache_dir();
void set_disk_cache_dir(std::string dir);  // overrides KILN_CACHE_DIR

// What this process's lookups found, and how many entries it wrote.
struct DiskCacheStats {
  int64_t hits = 0, misses = 0, corrupt = 0, writes = 0;
};
DiskCacheStats disk_cache_stats();

// A 128-bit hex key of the parts, kiln's codegen sources and Halide's version (KILN_CODEGEN_VERSION).
std::string cache_key(const std::vector<std::string>& parts);

// The path of the verified entry, or "" when it is missing or corrupt.
std::string find_cache_entry(const std::string& key, const std::string& ext);

// Removes entry `key` (a library that passed its checksum but failed to load).
void remove_cache_entry(const std::string& key, const std::string& ext);

// Copies the file at `payload` into the cache as entry `key` and returns the entry's path.
std::string store_cache_entry(const std::string& key, const std::string& ext, const std::string& payload);

}  // namespace kiln
