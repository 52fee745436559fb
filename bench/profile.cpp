// `kiln profile MODEL`: a zoo model under the profiler (dsl/profiler.h): a few eager calls, the
// compiled function's first call (its trace, graph passes and backend phases), then a few
// compiled calls, each group in a scope of its own; prints the table and writes the Chrome trace.
// With --device cuda, every kernel, copy and memset with its device time too (CUPTI).
// --train profiles the training step (forward, loss, backward, AdamW) instead of the forward.
#include <cstdio>

#include "bench/commands.h"
#include "bench/train_step.h"
#include "bench/zoo.h"
#include "kiln.h"

namespace kiln::bench {

namespace {

constexpr int kCalls = 5;

void wait_for(Device d) {
  if (d.is_cuda()) cuda_synchronize(d.index);
}

}  // namespace

int run_profile(const BenchOptions& opts, const std::string& out_path) {
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "kiln profile: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  zoo::ZooSize size = zoo::parse_zoo_size(opts.size);
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
  {
    RecordFunction r("compiled, " + std::to_string(kCalls) + " calls");
    for (int i = 0; i < kCalls; ++i) compiled();
    wait_for(opts.device);
  }
  p.stop();
  std::printf("kiln profile: %s (%s) on %s, %s\n\n%s", m.name.c_str(), m.description.c_str(),
              opts.device.str().c_str(), opts.train ? "training step" : "forward", p.table().c_str());
  p.save_chrome_trace(out_path);
  std::printf("\nwrote %s (%zu events; open it in Perfetto or chrome://tracing)\n", out_path.c_str(), p.events().size());
  return 0;
}

}  // namespace kiln::bench
