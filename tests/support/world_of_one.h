// A process group of one rank in this process, on a free port, destroyed at the end of the scope
// (tests of collectives and DistributedDataParallel that need no peers).
#pragma once
#include <chrono>

#include "kiln.h"

namespace kiln::test {

struct WorldOfOne {
  explicit WorldOfOne(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    distributed::InitOptions o;
    o.rank = 0, o.world_size = 1, o.master_port = distributed::free_port();
    o.timeout = timeout;
    distributed::init_process_group(o);
  }
  ~WorldOfOne() { distributed::destroy_process_group(); }
  WorldOfOne(const WorldOfOne&) = delete;
  WorldOfOne& operator=(const WorldOfOne&) = delete;
};

}  // namespace kiln::test
