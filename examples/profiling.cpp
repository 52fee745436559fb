// Where the time goes: a small GPT's forward, eagerly and compiled, under the profiler
// (dsl/profiler.h). Eagerly, every op is one kernel and one trip through dispatch on the host;
// compiled, the forward is a few fused pipelines and cuBLAS or Eigen GEMMs between them. The table
// shows both, grouped by name; the trace (profile.json) opens in Perfetto or chrome://tracing.
// With --device cuda (and CUPTI from the CUDA toolkit) the device's kernels come too: how many
// each call launches, and how long the device sat idle between them (the gaps the host's launch
// work leaves). Last, on CUDA, the compiled forward replayed as a CUDA graph (compile's mode
// "reduce-overhead", graph/cuda_graphs.h): one launch a call instead of one a kernel.
//
//   build/bin/example_profiling [--device cpu|cuda] [--out profile.json]
//
// Exits non-zero when the compiled forward differs from the eager one or the profile misses the
// events it reads.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

constexpr int kCalls = 10;

struct Phase {
  std::string scope;
  double host_ms = 0;    // the scope's host time
  int ops = 0;           // eager op events inside it (a compiled call's GEMMs and attention run as ops)
  int regions = 0;       // fused pipelines of a compiled call inside it
  int kernels = 0;       // device kernels its events launched (CUDA)
  double busy_ms = 0;    // the union of those kernels' device intervals
  double span_ms = 0;    // first kernel start to last kernel end
};

// The scope named `scope` and what ran inside it: host events by start time inside its interval,
// device kernels by the host event that launched them.
Phase phase_of(const std::vector<ProfileEvent>& ev, const std::string& scope) {
  Phase p{scope};
  const ProfileEvent* s = nullptr;
  for (const ProfileEvent& e : ev)
    if (e.category == "user" && e.name == scope) s = &e;
  if (!s) return p;
  p.host_ms = s->duration_us / 1e3;
  auto inside = [&](const ProfileEvent& e) {
    return e.device < 0 && e.start_us >= s->start_us && e.start_us <= s->start_us + s->duration_us;
  };
  std::vector<uint64_t> launchers;
  for (const ProfileEvent& e : ev)
    if (inside(e)) {
      p.ops += e.category == "op";
      p.regions += e.category == "region";
    }
  for (const ProfileEvent& e : ev)
    if (inside(e) && e.id) launchers.push_back(e.id);
  std::vector<std::pair<double, double>> kernels;
  for (const ProfileEvent& e : ev)
    if (e.category == "kernel" && std::find(launchers.begin(), launchers.end(), e.launched_by) != launchers.end())
      kernels.push_back({e.start_us, e.start_us + e.duration_us});
  p.kernels = int(kernels.size());
  std::sort(kernels.begin(), kernels.end());
  double run_start = 0, run_end = -1;
  for (auto [start, end] : kernels) {
    if (start > run_end) {
      if (run_end > run_start) p.busy_ms += (run_end - run_start) / 1e3;
      run_start = start;
    }
    run_end = std::max(run_end, end);
  }
  if (run_end > run_start) p.busy_ms += (run_end - run_start) / 1e3;
  if (!kernels.empty()) p.span_ms = (run_end - kernels.front().first) / 1e3;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  Device device = Device::cpu();
  std::string out = "profile.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--device") == 0) device = std::string(argv[i + 1]) == "cuda" ? Device::cuda(0) : Device::cpu();
    else if (std::strcmp(argv[i], "--out") == 0) out = argv[i + 1];
  }
  auto wait = [&] {
    if (device.is_cuda()) cuda_synchronize();
  };
  manual_seed(0);
  nn::TinyGpt model({.vocab = 256, .seq = 64, .width = 128, .heads = 4, .layers = 2});
  model.to(device);
  Tensor tokens = randint(0, 256, {8, 64}).to(device);
  NoGradGuard no_grad;
  auto compiled = compile([&](const Tensor& t) { return model.forward(t); }, {.backend = "halide", .name = "tiny_gpt"});
  // The compile happens here, before the profile; its phases show in a profile of this call.
  double diff = abs(compiled(tokens) - model.forward(tokens)).max().item<double>();
  auto graphed = compile([&](const Tensor& t) { return model.forward(t); },
                         {.backend = "halide", .name = "tiny_gpt graphs", .mode = "reduce-overhead"});
  double graph_diff = 0;
  if (device.is_cuda())  // two warm-up calls, then the capture: all before the profile
    for (int i = 0; i < 3; ++i) graph_diff = abs(graphed(tokens) - model.forward(tokens)).max().item<double>();
  wait();

  Profiler profiler({.cuda = device.is_cuda()});
  {
    RecordFunction r("eager");
    for (int i = 0; i < kCalls; ++i) model.forward(tokens);
    wait();
  }
  {
    RecordFunction r("compiled");
    for (int i = 0; i < kCalls; ++i) compiled(tokens);
    wait();
  }
  if (device.is_cuda()) {
    RecordFunction r("cuda graphs");
    for (int i = 0; i < kCalls; ++i) graphed(tokens);
    wait();
  }
  profiler.stop();
  std::printf("%s\n", profiler.table(16).c_str());
  profiler.save_chrome_trace(out);

  std::vector<ProfileEvent> ev = profiler.events();
  Phase eager = phase_of(ev, "eager"), comp = phase_of(ev, "compiled"), graphs = phase_of(ev, "cuda graphs");
  std::vector<Phase> phases{eager, comp};
  if (device.is_cuda()) phases.push_back(graphs);
  std::printf("tiny GPT forward [8, 64] on %s, per call (%d calls each):\n", device.str().c_str(), kCalls);
  for (const Phase& p : phases) {
    std::printf("  %-11s host %7.3f ms, %5.1f ops, %5.1f fused regions", p.scope.c_str(), p.host_ms / kCalls,
                double(p.ops) / kCalls, double(p.regions) / kCalls);
    if (device.is_cuda())
      std::printf(", %5.1f kernels, device busy %.3f ms of a %.3f ms span (idle %.0f%%)", double(p.kernels) / kCalls,
                  p.busy_ms / kCalls, p.span_ms / kCalls,
                  p.span_ms > 0 ? 100 * (p.span_ms - p.busy_ms) / p.span_ms : 0.0);
    std::printf("\n");
  }
  std::printf("max |compiled - eager| = %.3g", diff);
  if (device.is_cuda()) std::printf(", replayed graph %.3g", graph_diff);
  std::printf("; trace written to %s\n", out.c_str());
  bool ok = diff < 1e-4 && graph_diff < 1e-4 && eager.ops >= kCalls && comp.regions >= kCalls &&
            (!device.is_cuda() || (eager.kernels > 0 && comp.kernels > 0 && graphs.kernels > 0));
  return ok ? 0 : 1;
}
