// The run-time half of the halide backend: a compiled graph as a list of steps, run in order over
// tensors. A step is one node run through its eager kernel (dispatch), or a region whose pipeline
// is compiled code, called through its argv entry point (a function of the disk cache's shared
// library) or, with KILN_CACHE=0, through the JIT runner the backend gives it. Each intermediate
// is dropped after its last read; an output may be computed into an input's tensor (in_place.h)
// or over a dying intermediate. Nothing here compiles code.
//
//   ExecutorPlan plan{graph, steps, in_place, over, library};  // or read_plan() (plan_file.h)
//   std::shared_ptr<CompiledGraph> cg = make_graph_executor(std::move(plan));
//   TensorList out = cg->run(inputs);
#pragma once
#include <HalideRuntime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/backend.h"
#include "schedules/region.h"
#include "schedules/weight_packing.h"

namespace kiln {

// A pipeline JIT-compiled in process, called with the region's tensors (inputs, then outputs)
// and the sizes of its symbols (Region::symbols).
using JitRegion = std::function<void(const std::vector<Tensor>& tensors, const std::vector<int32_t>& sizes)>;

struct ExecutorStep {
  int node = -1;  // an eager node, or -1 for a region
  Region region;
  RegionFunction function = nullptr;  // the region's compiled code
  std::string function_name;          // its name in the plan's code library
  JitRegion jit;                      // or its JIT-compiled pipeline
  std::shared_ptr<PackedWeight> packed_b;  // an eager matmul's weight, packed once per version
  std::vector<std::shared_ptr<PackedWeight>> packers;  // per region input: its packed panels, or null
};

struct ExecutorPlan {
  std::shared_ptr<const Graph> graph;
  std::vector<ExecutorStep> steps;
  // Outputs computed into an input's tensor (in_place.h): value -> the input positions bound to it.
  std::map<int, std::vector<int>> in_place;
  std::map<int, int> over;  // outputs computed over a dying intermediate: value -> that intermediate
  std::shared_ptr<const CodeLibrary> code;  // the regions' compiled code (null when JIT-compiled)
};

std::shared_ptr<CompiledGraph> make_graph_executor(ExecutorPlan plan);

// Calls a compiled region's function of `code` on tensors (its inputs, then its outputs) and its
// symbols' sizes, as the executor does.
void run_region_function(RegionFunction fn, const CodeLibrary& code, const Region& r, const std::vector<Tensor>& tensors,
                         std::vector<int32_t> sizes);

// While set on a thread, called before each region step an executor runs there, with the graph,
// the step, the region's buffers (its inputs, then its outputs, not yet computed) and its
// symbols' sizes: the region tuner records regions so (schedules/region_tuner.h).
using RegionObserver = std::function<void(const std::shared_ptr<const Graph>& graph, const ExecutorStep& step,
                                          const std::vector<Tensor>& buffers, const std::vector<int32_t>& sizes)>;
// Sets this thread's observer (null: none) and returns the previous one.
RegionObserver* exchange_region_observer(RegionObserver* observer);

// The plan a compiled graph runs, when it is a graph executor's (else null).
const ExecutorPlan* executor_plan(const CompiledGraph& g);

// The weight packers of a region's inputs: one for each it reads as packed panels, else null.
std::vector<std::shared_ptr<PackedWeight>> region_packers(const Region& r);

// Outputs computed in place in this process so far (ExecutorPlan::in_place): the executor still
// checks at run time that no other input shares the tensor's memory; otherwise the output gets its
// own.
int64_t in_place_outputs_run();

// "a pipeline of 7 ops": a region in log lines and errors.
std::string region_what(const Region& r);
// A step for profiles, StepTimer and the tuner: "a pipeline of 3 ops (mul where softmax) ->
// [8, 12, 1024, 1024]", or the eager node's op and output shape ("matmul -> [8192, 2304]").
std::string step_what(const Graph& g, const ExecutorStep& s);

// A tensor's dims as a halide_buffer_t takes them (innermost first); kiln::Error beyond Halide's
// 32-bit indexing.
std::vector<halide_dimension_t> halide_dims(const Tensor& t);

}  // namespace kiln
