// FNV-1a, 64 bits: the short keys kiln names files and records by (a region schedule's key, a
// tuning record's file, the disk cache's key, a kernel's fingerprint). Not collision-proof:
// where a collision would matter the named thing holds its whole key and is checked
// (schedules/tuning_db.h).
//
//   std::string name = fnv1a_hex(signature);   // "0f3a9c2b7d41e856"
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// 16 hex digits of the text's hash.
inline std::string fnv1a_hex(std::string_view bytes) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(fnv1a(bytes)));
  return out;
}

}  // namespace kiln
