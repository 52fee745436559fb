// `kiln demo`: trains a tiny GPT eagerly to reverse sequences of digits (fresh random batches
// every step: "3 1 4 1 5 9 2 6 |" -> "6 2 9 5 1 4 1 3"), with AdamW, on the CPU or a CUDA
// device (--device cuda: the same model and batches, every op on the GPU). It prints a
// progress line every few steps, then a summary and where one training step spends its time.
// The compiled column is inference: the trained model's forward on 256 sequences, eager against
// kiln::compile on the halide backend (compile time, step time, speedup, the same answers).
// Compiled training joins with the compiled backward.
#include <cmath>
#include <cstdio>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/op_profile.h"
#include "bench/timing.h"
#include "kiln.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

constexpr int64_t kDigits = 8, kSeparator = 10, kVocab = 11;

struct Batch {
  Tensor tokens;   // (B, 2n): digits, separator, reversed digits without the last
  Tensor targets;  // (B, n): the reversed digits
};

Batch make_batch(int64_t batch, Device device) {
  Tensor digits = randint(0, 10, {batch, kDigits});
  std::vector<int64_t> d = digits.to_vector<int64_t>(), tok, tgt;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = &d[size_t(b * kDigits)];
    for (int64_t i = 0; i < kDigits; ++i) tok.push_back(row[i]);
    tok.push_back(kSeparator);
    for (int64_t i = kDigits - 1; i > 0; --i) tok.push_back(row[i]);
    for (int64_t i = kDigits - 1; i >= 0; --i) tgt.push_back(row[i]);
  }
  return {from_vector(tok, {batch, 2 * kDigits}).to(device), from_vector(tgt, {batch, kDigits}).to(device)};
}

// Cross-entropy over the answer half of each sequence.
Tensor loss_of(nn::TinyGpt& model, const Batch& b) {
  Tensor logits = model.forward(b.tokens).narrow(1, kDigits, kDigits);
  return cross_entropy(logits.reshape({-1, kVocab}), b.targets.reshape({-1}));
}

double accuracy(const Tensor& logits, const Batch& b) {
  Tensor pred = argmax(logits.narrow(1, kDigits, kDigits), -1);
  return mean(eq(pred, b.targets).to(f32)).item<double>();
}

struct Inference {
  double eager_ms = 0, compiled_ms = 0, compile_s = 0, eager_accuracy = 0, compiled_accuracy = 0;
  bool from_disk_cache = false;
};

// Waits for the device, so that wall-clock times of CUDA work include the work.
void wait_for(Device d) {
  if (d.is_cuda()) cuda_synchronize(d.index);
}

// The trained model's forward on one batch, eager and compiled.
Inference measure_inference(nn::TinyGpt& model, const Batch& b, Device d) {
  NoGradGuard no_grad;
  Inference r;
  CompiledFunction<Tensor(Tensor)> compiled([&model](Tensor t) { return model.forward(t); },
                                            {.backend = "halide", .name = "tiny_gpt_forward"}, &model);
  int64_t hits = disk_cache_stats().hits;
  double t0 = now_seconds();
  Tensor logits = compiled(b.tokens);
  r.compile_s = now_seconds() - t0;
  r.from_disk_cache = disk_cache_stats().hits > hits;
  r.compiled_accuracy = accuracy(logits, b);
  r.eager_accuracy = accuracy(model.forward(b.tokens), b);
  r.eager_ms = time_median([&] { model.forward(b.tokens); wait_for(d); }, 1, 3, 15, 0.5, 200).median_s * 1e3;
  r.compiled_ms = time_median([&] { compiled(b.tokens); wait_for(d); }, 1, 3, 15, 0.5, 200).median_s * 1e3;
  return r;
}

}  // namespace

int run_demo(const DemoOptions& opts) {
  KILN_CHECK(opts.steps >= 1, "demo: --steps must be >= 1");
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "demo: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  manual_seed(0);
  const int64_t batch = 32;
  nn::TinyGpt model({.vocab = kVocab, .seq = 2 * kDigits, .width = 64, .heads = 4, .layers = 2});
  model.to(opts.device);  // drawn on the CPU: the same initial weights on every device
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += p.numel();

  std::printf("kiln demo: train a tiny GPT to reverse %lld digits, eagerly on %s\n", (long long)kDigits,
              opts.device.str().c_str());
  std::printf("  model: vocab %lld, sequence %lld, width 64, 4 heads, 2 layers, %lld parameters; AdamW lr 3e-3\n",
              (long long)kVocab, (long long)(2 * kDigits), (long long)params);
  std::printf("  data: fresh batches of %lld random sequences each step; loss over the answer half\n\n",
              (long long)batch);

  std::vector<double> step_s;
  float loss_first = 0, loss_last = 0;
  int every = std::max(1, opts.steps / 15);
  double t_start = now_seconds();
  for (int step = 1; step <= opts.steps; ++step) {
    Batch b = make_batch(batch, opts.device);
    double t0 = now_seconds();
    Tensor loss = loss_of(model, b);
    loss.backward();
    opt.step();
    opt.zero_grad();
    float value = loss.item<float>();
    step_s.push_back(now_seconds() - t0);
    if (step == 1) loss_first = value;
    loss_last = value;
    if (step % every == 0 || step == 1 || step == opts.steps)
      std::printf("  step %4d/%d  loss %.4f  step %.2f ms\n", step, opts.steps, value, step_s.back() * 1e3);
  }
  double total_s = now_seconds() - t_start;

  OpProfile profile;
  double profiled_s = 0;
  {
    Batch b = make_batch(batch, opts.device);
    DispatchModeGuard g(&profile);
    double t0 = now_seconds();
    Tensor loss = loss_of(model, b);
    loss.backward();
    opt.step();
    opt.zero_grad();
    wait_for(opts.device);
    profiled_s = now_seconds() - t0;
  }
  Inference inference = measure_inference(model, make_batch(256, opts.device), opts.device);
  double acc = inference.eager_accuracy;
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  double median_ms = sorted[sorted.size() / 2] * 1e3;

  std::printf("\n  %-28s %12s\n", "", "eager");
  std::printf("  %-28s %12.4f\n", "loss, first step", loss_first);
  std::printf("  %-28s %12.4f\n", "loss, last step", loss_last);
  std::printf("  %-28s %12.1f%%\n", "answer digits right (256)", acc * 100);
  std::printf("  %-28s %12.2f\n", "step time, median (ms)", median_ms);
  std::printf("  %-28s %12.1f\n", "total time (s)", total_s);
  std::printf("\n  inference on 256 sequences     %12s %12s\n", "eager", "compiled");
  std::printf("  %-28s %12s %12.2f%s\n", "compile time (s)", "-", inference.compile_s,
              inference.from_disk_cache ? "  (from the disk cache)" : "");
  std::printf("  %-28s %12.2f %12.2f\n", "forward, median (ms)", inference.eager_ms, inference.compiled_ms);
  std::printf("  %-28s %12s %11.2fx\n", "speedup", "", inference.eager_ms / inference.compiled_ms);
  std::printf("  %-28s %11.1f%% %11.1f%%\n", "answer digits right", inference.eager_accuracy * 100,
              inference.compiled_accuracy * 100);
  std::printf("\n  where one training step spends its time (%.2f ms: forward, backward and optimizer ops):\n",
              profiled_s * 1e3);
  profile.print(profiled_s);

  if (!opts.json_path.empty()) {
    Json j = Json::object();
    j.set("device", opts.device.str()).set("steps", opts.steps).set("loss_first", double(loss_first));
    j.set("loss_last", double(loss_last)).set("eager_step_ms_median", median_ms);
    j.set("accuracy", acc).set("parameters", params);
    j.set("eager_forward_ms", inference.eager_ms).set("compiled_forward_ms", inference.compiled_ms);
    j.set("compile_s", inference.compile_s).set("compiled_accuracy", inference.compiled_accuracy);
    write_file_atomic(opts.json_path, j.dump());
    std::printf("\nwrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
