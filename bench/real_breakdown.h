// Where the time of one real-size training step goes on a CUDA device (`kiln bench gpu --size
// real`): the compiled step graph step by graph step (each step's own device time, the idle time
// between, the time outside the graphs), and the eager step op by op and backward node by node.
#pragma once
#include <functional>
#include <string>

#include "bench/json.h"
#include "dsl/device.h"

namespace kiln::bench {

// The per-step tables of the report, one row per model and entry.
struct StepTables {
  Json breakdown = Json::array();   // "step_breakdown": device ms by category
  Json top_steps = Json::array();   // "step_top": the costliest graph steps
  Json top_groups = Json::array();  // "step_groups": graph steps grouped by what they run
  Json eager_ops = Json::array();   // "eager_step_ops": the eager step's ops and backward nodes

  void put(Json& report) const {
    report.set("step_breakdown", breakdown);
    report.set("step_top", top_steps);
    report.set("step_groups", top_groups);
    report.set("eager_step_ops", eager_ops);
  }
};

// Where one compiled step's device time goes: each graph step's own time (a run that waits for
// the device before each step), the rest of the normal run's interval as idle time, and the
// time outside the graphs (guards, the write-back of parameters, host work between graphs).
void step_breakdown(const std::string& model, Device d, const std::function<void()>& step, StepTables& tables);

// Where one eager step spends its time: the forward and the optimizer op by op, the backward node
// by node, the device waited for around each (an op's time is its device time plus its host time).
void eager_op_breakdown(const std::string& model, Device d, const std::function<void()>& step, Json& rows);

}  // namespace kiln::bench
