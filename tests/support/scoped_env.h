// An environment variable set for one scope, its former value (or its absence) restored after.
//
//   ScopedEnv check("KILN_CHECK_INDICES", "1");
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::test {

struct ScopedEnv {
  std::string name;
  std::optional<std::string> saved;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) saved = v;
    ::setenv(name.c_str(), value, 1);
  }
  ~ScopedEnv() {
    if (saved) ::setenv(name.c_str(), saved->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace kiln::test
