// The subcommands of the `kiln` command line.
#pragma once
#include <string>

#include "dsl/device.h"

namespace kiln::bench {

struct BenchOptions {
  Device device = Device::cpu();
  std::string json_path;  // --json FILE
  std::string filter;     // --filter SUBSTRING (ops whose name contains it)
  std::string self_path;  // this executable, for fresh-process measurements
};

struct DemoOptions {
  Device device = Device::cpu();
  int steps = 300;
  std::string json_path;
};

int run_demo(const DemoOptions& opts);
int run_bench_ops(const BenchOptions& opts);
int run_first_op();

}  // namespace kiln::bench
