// The one main() of every test executable.
#define BOOST_TEST_MODULE kiln
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include "bench/crash_stack.h"

namespace {
// KILN_CRASH_STACK=1 (with --catch_system_errors=no): a crash prints its stack.
const bool crash_stack = [] {
  if (const char* v = std::getenv("KILN_CRASH_STACK"); v && *v == '1') kiln::bench::print_stack_on_crash();
  return true;
}();
}  // namespace
