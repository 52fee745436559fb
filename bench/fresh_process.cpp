#include "bench/fresh_process.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "dsl/error.h"

namespace kiln::bench {

namespace {

// The value of the first "KEY VALUE" line the command prints.
double run_once(const std::string& command, const std::string& key, const std::string& who) {
  FILE* p = ::popen(command.c_str(), "r");
  KILN_CHECK(p, who, ": cannot run ", command);
  std::string output;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  int status = ::pclose(p);
  double value = -1;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line) && value < 0;)
    if (line.rfind(key + " ", 0) == 0) value = std::strtod(line.c_str() + key.size() + 1, nullptr);
  KILN_CHECK(status == 0 && value >= 0, who, ": '", command, "' failed or printed no '", key, "' line:\n", output);
  return value;
}

}  // namespace

double fresh_process_median(const std::string& command, const std::string& key, int runs, const std::string& who) {
  std::vector<double> values;
  for (int i = 0; i < runs; ++i) values.push_back(run_once(command, key, who));
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace kiln::bench
