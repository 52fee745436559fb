// `kiln profile MODEL`: a zoo model under the profiler (dsl/profiler.h): a few eager calls, the
// compiled function's first call (its trace, graph passes and backend phases), then a few
// compiled calls, each group in a scope of its own; prints the table and writes the Chrome trace.
// With --device cuda, every kernel, copy and memset with its device time too (CUPTI).
// --train profiles the training step (forward, loss, backward, AdamW) instead of the forward.
// Last, what the profiler costs: the compiled call's median with and without it, and the device
// time of what the profiled calls ran against the call's time, and where the device sat idle in
// those calls (dsl/profile_gaps.h: each gap charged to the launch it waited for).
#include <algorithm>
#include <cstdio>
#include <utility>

#include "bench/commands.h"
#include "bench/timing.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "dsl/profile_gaps.h"
#include "kiln.h"

namespace kiln::bench {

namespace {

constexpr int kCalls = 5;

void wait_for(Device d) {
  if (d.is_cuda()) cuda_synchronize(d.index);
}

// The profile's interval of the host scope named `scope` ({0, -1}: none recorded).
std::pair<double, double> scope_window(const std::vector<ProfileEvent>& events, const std::string& scope) {
  for (const ProfileEvent& e : events)
    if (e.device < 0 && e.name == scope) return {e.start_us, e.start_us + e.duration_us};
  return {0, -1};
}

// What the profiler costs and how much of a call its events account for: the compiled calls'
// median with and without it (each call waited for), and the device time of the kernels, copies
// and memsets that ran inside the profiled calls' scope, per call.
void print_overhead(const std::vector<ProfileEvent>& events, const std::string& scope,
                    std::vector<double> profiled_s, double plain_s) {
  std::sort(profiled_s.begin(), profiled_s.end());
  const double with_s = profiled_s[profiled_s.size() / 2];
  const auto [from, to] = scope_window(events, scope);
  double device_us = 0;
  for (const ProfileEvent& e : events)
    if (e.device >= 0 && e.start_us >= from && e.start_us + e.duration_us <= to) device_us += e.duration_us;
  std::printf("compiled call: %.3f ms without the profiler, %.3f ms with it (%+.1f%%)\n", plain_s * 1e3, with_s * 1e3,
              100 * (with_s / plain_s - 1));
  if (device_us > 0)
    std::printf("device time of what a compiled call ran: %.3f ms, %.1f%% of the call without the profiler\n",
                device_us / profiled_s.size() / 1e3, 100 * device_us / profiled_s.size() / 1e6 / plain_s);
}

// Where the device waited during the profiled compiled calls (each call waited for at its end).
void print_gaps(const std::vector<ProfileEvent>& events, const std::string& scope, int device, int calls) {
  const auto [from, to] = scope_window(events, scope);
  if (to < from) return;
  std::printf("\n%d compiled calls, each waited for: %s", calls,
              format_device_gaps(device_gaps(events, device, from, to)).c_str());
}

}  // namespace

int run_profile(const BenchOptions& opts, const std::string& out_path) {
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "kiln profile: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
  if (size == zoo::ZooSize::real) set_float32_matmul_precision(Float32MatmulPrecision::high);  // TF32, as the real-size bench
  manual_seed(0);
  zoo::ZooModel m = zoo::make_zoo_model(opts.filter, size, opts.device);
  TensorList in = m.make_inputs();
  std::optional<NoGradGuard> no_grad;
  if (!opts.train) no_grad.emplace();
  optim::AdamW opt(m.module->parameters(), {});
  std::function<void()> eager, compiled;
  zoo::ZooFunction forward = zoo::compile_zoo_model(m, {.backend = opts.backend, .name = m.name});
  auto step = compile([&](std::vector<Tensor> xs) { return train_step(m, opt, xs); },
                      {.backend = opts.backend, .name = m.name + " train step"});
  if (opts.train) {
    eager = [&] { train_step(m, opt, in); };
    compiled = [&] { step(in); };
  } else {
    eager = [&] { m.forward(in); };
    compiled = [&] { forward(in); };
  }
  eager();  // warm-up: first kernel launches, allocator
  wait_for(opts.device);

  Profiler p({.cuda = opts.device.is_cuda()});
  {
    RecordFunction r("eager, " + std::to_string(kCalls) + " calls");
    for (int i = 0; i < kCalls; ++i) eager();
    wait_for(opts.device);
  }
  {
    RecordFunction r("compiled, first call");
    compiled();
    wait_for(opts.device);
  }
  std::vector<double> profiled_s;  // each compiled call to the device's end of it, profiled
  const std::string calls_scope = "compiled, " + std::to_string(kCalls) + " calls";
  {
    RecordFunction r(calls_scope);
    for (int i = 0; i < kCalls; ++i) {
      double t0 = now_seconds();
      compiled();
      wait_for(opts.device);
      profiled_s.push_back(now_seconds() - t0);
    }
  }
  p.stop();
  std::printf("kiln profile: %s (%s) on %s, %s\n\n%s", m.name.c_str(), m.description.c_str(),
              opts.device.str().c_str(), opts.train ? "training step" : "forward", p.table().c_str());
  p.save_chrome_trace(out_path);
  std::printf("\nwrote %s (%zu events; open it in Perfetto or chrome://tracing)\n", out_path.c_str(), p.events().size());
  print_overhead(p.events(), calls_scope, profiled_s, time_median([&] {
                   compiled();
                   wait_for(opts.device);
                 }).median_s);
  if (opts.device.is_cuda()) print_gaps(p.events(), calls_scope, opts.device.index, kCalls);
  return 0;
}

}  // namespace kiln::bench
