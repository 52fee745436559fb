// Device time of each step of the compiled graphs that run on a CUDA device while a StepTimer is
// alive: `kiln bench gpu --size real` splits a training step into cuBLAS GEMMs, pipelines, eager
// kernels and idle gaps with it. Each step is bracketed by CUDA events on kiln's stream. Without
// `synchronize`, steps are timed as they normally run (an interval includes the time the GPU
// waited for the host to launch the step); with it, the host waits for the GPU before each step,
// so an interval is the step's own device time (plus one launch latency).
//
//   StepTimer t(0);
//   step(inputs);
//   for (const StepTime& s : t.results()) std::cout << s.category << " " << s.ms << "\n";
#pragma once
#include <string>
#include <vector>

namespace kiln {

struct StepTime {
  std::string category;  // "cublas_gemm", "pipeline", "eager_kernel", "cuda_graph" (a whole replay)
  std::string what;      // "matmul", "a pipeline of 12 ops"
  double ms = 0;
  double gap_before_ms = 0;  // from the end of the previous step (host work between steps)
  double host_ms = 0;        // the host's time to issue the step (launches, allocation, argument setup)
};

class StepTimer {
 public:
  explicit StepTimer(int device, bool synchronize = false);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  // The steps timed so far, in order (waits for the device); clears them.
  std::vector<StepTime> results();

  // Called by the halide backend around each step of a CUDA graph.
  void before(std::string category, std::string what);
  void after();

 private:
  struct State;
  State* state_;
};

// The live StepTimer of this process, or null.
StepTimer* active_step_timer();

}  // namespace kiln
