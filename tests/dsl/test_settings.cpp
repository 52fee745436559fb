// The environment settings (dsl/settings.h): typed reads with their fallbacks, kiln::Error naming
// the variable and what it accepts for a malformed value, a name outside the table refused, and
// every setting of the table listed in the README.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dsl/settings.h"
#include "support/reference.h"
#include "support/scoped_env.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(settings_read_typed_values_with_fallbacks) {
  ::unsetenv("KILN_CACHE_MAX_MB");
  BOOST_TEST(int_setting("KILN_CACHE_MAX_MB", 2048, 0, 1 << 20) == 2048);
  BOOST_TEST(!setting("KILN_CACHE_MAX_MB").has_value());
  {
    ScopedEnv e("KILN_CACHE_MAX_MB", "");
    BOOST_TEST(!setting("KILN_CACHE_MAX_MB").has_value());  // empty reads as unset
  }
  {
    ScopedEnv e("KILN_CACHE_MAX_MB", "512");
    BOOST_TEST(int_setting("KILN_CACHE_MAX_MB", 2048, 0, 1 << 20) == 512);
    BOOST_TEST(*setting("KILN_CACHE_MAX_MB") == "512");
  }
  for (const char* on : {"1", "true", "ON", "yes"}) {
    ScopedEnv e("KILN_GPU_ROW_STAGE", on);
    BOOST_TEST(flag_setting("KILN_GPU_ROW_STAGE", false), on);
  }
  for (const char* off : {"0", "false", "off", "No"}) {
    ScopedEnv e("KILN_GPU_ROW_STAGE", off);
    BOOST_TEST(!flag_setting("KILN_GPU_ROW_STAGE", true), off);
  }
  BOOST_TEST(flag_setting("KILN_GPU_ROW_STAGE", true));
}

BOOST_AUTO_TEST_CASE(malformed_settings_name_the_variable_and_what_it_accepts) {
  {
    ScopedEnv e("KILN_CACHE_MAX_MB", "2 GB");
    check_error([] { int_setting("KILN_CACHE_MAX_MB", 2048, 0, 1 << 20); },
                {"KILN_CACHE_MAX_MB", "whole number from 0 to 1048576", "'2 GB'"});
  }
  {
    ScopedEnv e("KILN_GPU_ROW_UNROLL", "32");
    check_error([] { int_setting("KILN_GPU_ROW_UNROLL", 8, 1, 16); }, {"KILN_GPU_ROW_UNROLL", "from 1 to 16", "'32'"});
  }
  {
    ScopedEnv e("KILN_CACHE", "maybe");
    check_error([] { flag_setting("KILN_CACHE", true); }, {"KILN_CACHE", "expected 1 or 0", "'maybe'"});
  }
  check_error([] { setting("KILN_NO_SUCH_THING"); }, {"KILN_NO_SUCH_THING", "not a setting kiln reads", "dsl/settings.cpp"});
}

BOOST_AUTO_TEST_CASE(every_setting_is_described_once_and_listed_in_the_readme) {
  std::set<std::string_view> names;
  for (const SettingInfo& s : settings()) {
    BOOST_TEST(names.insert(s.name).second, s.name << " twice");
    BOOST_TEST(!s.what.empty(), s.name);
    BOOST_TEST(!s.fallback.empty(), s.name);
  }
  std::filesystem::path readme = std::filesystem::path(__FILE__).parent_path() / "../../README.md";
  std::ifstream in(readme);
  BOOST_TEST_REQUIRE(in.good(), "cannot read " << readme);
  std::stringstream text;
  text << in.rdbuf();
  for (std::string_view name : names)
    BOOST_TEST(text.str().find("`" + std::string(name) + "`") != std::string::npos, name << " is not in the README");
  std::string listed = settings_text();
  for (std::string_view name : names) BOOST_TEST(listed.find(std::string(name) + " (default: ") != std::string::npos);
}
