#include "graph/step_timing.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"

namespace kiln {

namespace {

std::atomic<StepTimer*> active{nullptr};

}  // namespace

struct StepTimer::State {
  int device;
  bool synchronize;
  CudaMarks marks;
  std::vector<StepTime> steps;
  std::chrono::steady_clock::time_point issued;
  State(int d, bool s) : device(d), synchronize(s), marks(d) {}
};

StepTimer::StepTimer(int device, bool synchronize) : state_(new State(device, synchronize)) {
  StepTimer* none = nullptr;
  KILN_CHECK(active.compare_exchange_strong(none, this), "StepTimer: another StepTimer is alive");
}

StepTimer::~StepTimer() {
  active.store(nullptr);
  delete state_;
}

StepTimer* active_step_timer() { return active.load(); }

void StepTimer::before(std::string category, std::string what) {
  if (state_->synchronize) cuda_synchronize(state_->device);
  state_->marks.mark();
  state_->steps.push_back({std::move(category), std::move(what), 0});
  state_->issued = std::chrono::steady_clock::now();
}

void StepTimer::after() {
  state_->marks.mark();
  state_->steps.back().host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - state_->issued).count();
}

std::vector<StepTime> StepTimer::results() {
  std::vector<double> ms = state_->marks.intervals_ms();  // before/after pairs: even intervals are steps
  std::vector<StepTime> out = std::move(state_->steps);
  state_->steps.clear();
  for (size_t i = 0; i < out.size() && 2 * i < ms.size(); ++i) {
    out[i].ms = ms[2 * i];
    if (i > 0) out[i].gap_before_ms = ms[2 * i - 1];
  }
  return out;
}

}  // namespace kiln
