// Measurements taken in fresh processes of `kiln` itself: a first call or a compile that a warm
// process would not repeat. The child prints "KEY VALUE" lines (`kiln bench compile-once`,
// `kiln bench aot-once`); this runs it `runs` times and returns the median of KEY's values.
#pragma once
#include <string>

namespace kiln::bench {

// kiln::Error naming `who` and the command when it fails or prints no KEY line.
double fresh_process_median(const std::string& command, const std::string& key, int runs, const std::string& who);

}  // namespace kiln::bench
