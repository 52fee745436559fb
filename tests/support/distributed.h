// Test support of the distributed suites (CPU, CUDA and the worker ranks): a process group of one
// rank in this process, and the training step and loss they train with.
#pragma once
#include <chrono>

#include "kiln.h"

namespace kiln::test {

// A process group of one rank in this process, on a free port, destroyed at the end of the scope
// (tests of collectives and DistributedDataParallel that need no peers).
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

// The loss the distributed tests train with: the mean square of the model's output.
inline Tensor mean_square(const Tensor& y) { return (y * y).mean(); }

// One training step on it: forward, loss, backward, the optimizer's step and zero_grad.
inline Tensor mean_square_step(nn::Module& m, optim::Optimizer& opt, const Tensor& x) {
  Tensor loss = mean_square(m.forward(x));
  loss.backward();
  opt.step();
  opt.zero_grad();
  return loss;
}

// Forward, the output's sum, backward: gradients without a step.
inline Tensor sum_backward(nn::Module& m, const Tensor& x) {
  Tensor loss = m.forward(x).sum();
  loss.backward();
  return loss;
}

}  // namespace kiln::test
