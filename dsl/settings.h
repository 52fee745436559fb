// Every setting kiln reads from the environment, in one table (dsl/settings.cpp): its name, its
// default and what it does. Code reads a setting only through the accessors below, which refuse
// a name the table lacks; a malformed value is a kiln::Error naming the variable and what it
// accepts. `kiln settings` prints the table; the README's list is the same table.
//
//   int64_t mb = int_setting("KILN_CACHE_MAX_MB", 2048, 0, 1 << 30);
//   if (auto dir = setting("KILN_DEBUG_DIR")) ...
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct SettingInfo {
  std::string_view name;
  std::string_view fallback;  // the default, in words
  std::string_view what;
};

const std::vector<SettingInfo>& settings();

// The variable's value, or nullopt when it is unset or empty.
std::optional<std::string> setting(std::string_view name);
// A whole number in [lo, hi], or `fallback` when unset.
int64_t int_setting(std::string_view name, int64_t fallback, int64_t lo, int64_t hi);
// 1/0 (also true/false, on/off, yes/no), or `fallback` when unset.
bool flag_setting(std::string_view name, bool fallback);

// The table as text, one setting a paragraph (`kiln settings`).
std::string settings_text();

}  // namespace kiln
