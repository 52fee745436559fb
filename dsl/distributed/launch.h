// Starting a job's processes, as torchrun does: `kiln run --nproc N program args...` (and tests)
// start N copies of a program with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set
// (a free port on 127.0.0.1), forward their output line by line with a "[rank k] " prefix, and
// stop the others (SIGTERM, then SIGKILL after a grace period) as soon as one fails. Each rank
// runs in a process group of its own, so stopping it stops what it started.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace kiln::distributed {

struct LaunchOptions {
  int nproc = 1;
  bool prefix_output = true;  // "[rank k] " before each line of a rank's stdout and stderr
  std::chrono::milliseconds grace{5000};  // from SIGTERM to SIGKILL for the survivors of a failure
  // CUDA_VISIBLE_DEVICES=LOCAL_RANK in each rank, which then sees its GPU as cuda:0. Compiled
  // pipelines of the halide backend run in device 0's CUDA context, so a rank that compiles for
  // CUDA needs this (its GPU at index 0) until they follow the tensors' device.
  bool one_gpu_each = false;
};

// Runs `argv` (argv[0] found through PATH) nproc times and waits for all; returns 0 when every
// rank exited 0, else the first failure's exit status (128 + signal for a signal), after
// stopping the rest. A program that cannot be started is a kiln::Error.
int launch(const std::vector<std::string>& argv, const LaunchOptions& options);

// A TCP port on 127.0.0.1 that nothing listens on now.
int free_port();

}  // namespace kiln::distributed
