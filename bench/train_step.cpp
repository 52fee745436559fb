#include "bench/train_step.h"

#include "bench/timing.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace kiln::bench {

Tensor train_step(zoo::ZooModel& m, optim::Optimizer& opt, const TensorList& inputs, std::optional<DType> autocast) {
  Tensor loss;
  {
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(inputs.at(0).device(), *autocast);
    loss = m.loss(m.forward(inputs));
  }
  loss.backward();
  opt.step();
  opt.zero_grad();
  return loss;
}

std::optional<DType> autocast_of(const std::string& precision) {
  if (precision == "tf32" || precision == "f32") return std::nullopt;
  KILN_CHECK(precision == "bf16" || precision == "f16", "--precision takes tf32, bf16 or f16, got '", precision, "'");
  return dtype_from_name(precision);
}

namespace {

constexpr int kWarmupSteps = 3, kMinSamples = 15;
constexpr size_t kMaxSamples = 400;
constexpr double kMinSeconds = 2.0;

double median_of(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

TensorList alive_anyway(const zoo::ZooModel& m, const TensorList& inputs) {
  TensorList keep = m.module->parameters();
  keep.insert(keep.end(), inputs.begin(), inputs.end());
  return keep;
}

}  // namespace

TrainStepReport measure_train_step(const std::string& model, Device device, CompileOptions options,
                                   const StepMs& step_ms, bool eager_column) {
  EnableGradGuard grad;
  TrainStepReport r;
  manual_seed(0);
  zoo::ZooModel eager = zoo::make_zoo_model(model, zoo::ZooSize::bench, device);
  manual_seed(0);
  zoo::ZooModel compiled = zoo::make_zoo_model(model, zoo::ZooSize::bench, device);
  TensorList in = eager.make_inputs();

  {  // the tapes: eager, and the compiled forward's single node
    if (eager_column) {
      Tensor loss = eager.loss(eager.forward(in));
      r.saved_bytes_eager = tape_saved_bytes(loss, alive_anyway(eager, in));
    }
    CompileOptions forward_options = options;
    forward_options.name = model + " forward+loss";
    auto f = zoo::compile_zoo_loss(compiled, forward_options);
    Tensor compiled_loss = f(in);
    r.saved_bytes_compiled = tape_saved_bytes(compiled_loss, alive_anyway(compiled, in));
  }

  optim::AdamW eager_opt(eager.module->parameters(), {});
  optim::AdamW compiled_opt(compiled.module->parameters(), {});
  options.name = model + " train step";
  auto step = compile([&](std::vector<Tensor> xs) { return train_step(compiled, compiled_opt, xs); }, options);
  step(in);
  r.compile_s = zoo::compile_seconds(step.stats());
  // Eager and compiled steps alternate, one of each per sample, and each column is the median of
  // its samples: a machine that slows down for a while slows both columns, not one.
  for (int i = 0; i < kWarmupSteps; ++i) {
    if (eager_column) train_step(eager, eager_opt, in);
    step(in);
  }
  std::vector<double> eager_ms, compiled_ms;
  double start = now_seconds();
  while (int(compiled_ms.size()) < kMinSamples ||
         (now_seconds() - start < kMinSeconds && compiled_ms.size() < kMaxSamples)) {
    if (eager_column) eager_ms.push_back(step_ms([&] { train_step(eager, eager_opt, in); }));
    compiled_ms.push_back(step_ms([&] { step(in); }));
  }
  r.eager_ms = eager_column ? median_of(eager_ms) : 0;
  r.compiled_ms = median_of(compiled_ms);
  return r;
}

void print_train_step(const std::string& model, const TrainStepReport& r, int digits) {
  std::printf("%-18s train step: eager %.*f ms, compiled %.*f ms, ratio %.2f (compile %.2f s); saved for backward: "
              "eager %.2f MB, compiled %.2f MB\n",
              model.c_str(), digits, r.eager_ms, digits, r.compiled_ms, r.compiled_ms / r.eager_ms, r.compile_s,
              double(r.saved_bytes_eager) / 1e6, double(r.saved_bytes_compiled) / 1e6);
  std::fflush(stdout);
}

void set_train_step_json(Json& row, const TrainStepReport& r, const std::string& prefix) {
  row.set(prefix + "eager_train_ms", r.eager_ms);
  row.set(prefix + "compiled_train_ms", r.compiled_ms);
  row.set(prefix + "compile_train_s", r.compile_s);
  row.set(prefix + "saved_bytes_eager", double(r.saved_bytes_eager));
  row.set(prefix + "saved_bytes_compiled", double(r.saved_bytes_compiled));
}

}  // namespace kiln::bench
