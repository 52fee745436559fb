// `kiln demo`: a small GPT-style transformer's forward pass and loss, run eagerly op by op
// through the generator-built kernels. It reports the model, the loss, the time of the first
// (cold) pass and the median of the following passes, and where the time went by op.
// (Training joins once autograd lands.)
#include <cmath>
#include <cstdio>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/op_profile.h"
#include "bench/timing.h"
#include "kiln.h"

namespace kiln::bench {

namespace {

struct Config {
  int64_t vocab = 64, seq = 64, batch = 8, width = 128, heads = 4, layers = 2;
};

struct Block {
  Tensor ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_fc, b_fc, w_proj, b_proj;
};

struct TinyGpt {
  Config cfg;
  Tensor wte, wpe, lnf_w, lnf_b;
  std::vector<Block> blocks;

  explicit TinyGpt(const Config& c) : cfg(c) {
    auto normal = [](Shape s, double std) { return randn(s) * std; };
    int64_t C = c.width;
    wte = normal({c.vocab, C}, 0.02);
    wpe = normal({c.seq, C}, 0.02);
    lnf_w = ones({C});
    lnf_b = zeros({C});
    for (int64_t l = 0; l < c.layers; ++l) {
      double proj_std = 0.02 / std::sqrt(2.0 * double(c.layers));
      blocks.push_back({ones({C}), zeros({C}), normal({3 * C, C}, 0.02), zeros({3 * C}),
                        normal({C, C}, proj_std), zeros({C}), ones({C}), zeros({C}),
                        normal({4 * C, C}, 0.02), zeros({4 * C}), normal({C, 4 * C}, proj_std), zeros({C})});
    }
  }

  int64_t parameter_count() const {
    int64_t n = wte.numel() + wpe.numel() + lnf_w.numel() + lnf_b.numel();
    for (const Block& b : blocks)
      for (const Tensor* t : {&b.ln1_w, &b.ln1_b, &b.w_qkv, &b.b_qkv, &b.w_o, &b.b_o, &b.ln2_w, &b.ln2_b,
                              &b.w_fc, &b.b_fc, &b.w_proj, &b.b_proj})
        n += t->numel();
    return n;
  }

  Tensor attention(const Tensor& h, const Block& b, const Tensor& causal) const {
    int64_t B = h.size(0), T = h.size(1), C = cfg.width, H = cfg.heads, D = C / H;
    Tensor qkv = linear(h, b.w_qkv, b.b_qkv);
    auto heads = [&](int64_t i) { return qkv.narrow(-1, i * C, C).reshape({B, T, H, D}).transpose(1, 2); };
    Tensor q = heads(0), k = heads(1), v = heads(2);
    Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(D)));
    Tensor probs = softmax(where(causal, scores, -INFINITY), -1);
    Tensor y = matmul(probs, v).transpose(1, 2).reshape({B, T, C});
    return linear(y, b.w_o, b.b_o);
  }

  Tensor loss(const Tensor& tokens, const Tensor& targets) const {
    int64_t T = tokens.size(1), C = cfg.width;
    Tensor pos = arange(0, double(T), 1, {.dtype = i64});
    Tensor causal = ge(pos.unsqueeze(1), pos.unsqueeze(0));
    Tensor x = embedding(wte, tokens) + embedding(wpe, pos);
    for (const Block& b : blocks) {
      x = x + attention(layer_norm(x, {C}, b.ln1_w, b.ln1_b), b, causal);
      Tensor h = layer_norm(x, {C}, b.ln2_w, b.ln2_b);
      x = x + linear(gelu(linear(h, b.w_fc, b.b_fc)), b.w_proj, b.b_proj);
    }
    Tensor logits = linear(layer_norm(x, {C}, lnf_w, lnf_b), wte);
    return cross_entropy(logits.reshape({-1, cfg.vocab}), targets.reshape({-1}));
  }
};

}  // namespace

int run_demo(const DemoOptions& opts) {
  KILN_CHECK(opts.device.is_cpu(), "demo: device ", opts.device, " is not supported yet (cpu only)");
  KILN_CHECK(opts.steps >= 1, "demo: --steps must be >= 1");
  manual_seed(0);
  Config cfg;
  TinyGpt model(cfg);
  // Next-token prediction on cyclic random sequences: targets are the tokens shifted by one.
  Tensor tokens = randint(0, cfg.vocab, {cfg.batch, cfg.seq});
  Tensor targets = cat({tokens.slice(1, 1, cfg.seq), tokens.slice(1, 0, 1)}, 1);

  std::printf("kiln demo: tiny GPT forward pass, eager, on %s\n", opts.device.str().c_str());
  std::printf("  model: vocab %lld, sequence %lld, width %lld, heads %lld, layers %lld, %lld parameters\n",
              (long long)cfg.vocab, (long long)cfg.seq, (long long)cfg.width, (long long)cfg.heads,
              (long long)cfg.layers, (long long)model.parameter_count());
  std::printf("  batch: %lld sequences of %lld tokens\n\n", (long long)cfg.batch, (long long)cfg.seq);

  double t0 = now_seconds();
  float first_loss = model.loss(tokens, targets).item<float>();
  double first_s = now_seconds() - t0;
  std::printf("  first pass: loss %.4f (ln(vocab) = %.4f for an untrained model), %.2f ms\n", first_loss,
              std::log(double(cfg.vocab)), first_s * 1e3);

  std::vector<double> times;
  float loss = first_loss;
  OpProfile profile;
  double profiled_s = 0;
  for (int s = 0; s < opts.steps; ++s) {
    double t = now_seconds();
    loss = model.loss(tokens, targets).item<float>();
    times.push_back(now_seconds() - t);
    if ((s + 1) % std::max(1, opts.steps / 5) == 0 || s + 1 == opts.steps)
      std::printf("  pass %3d/%d: loss %.4f, %.2f ms\n", s + 1, opts.steps, loss, times.back() * 1e3);
  }
  {
    DispatchModeGuard g(&profile);
    double t = now_seconds();
    model.loss(tokens, targets).item<float>();
    profiled_s = now_seconds() - t;
  }
  std::sort(times.begin(), times.end());
  double median_ms = times[times.size() / 2] * 1e3;
  std::printf("\n  forward median over %d passes: %.2f ms (min %.2f, max %.2f)\n\n", opts.steps, median_ms,
              times.front() * 1e3, times.back() * 1e3);
  std::printf("  where one pass spends its time (%.2f ms, by op):\n", profiled_s * 1e3);
  profile.print(profiled_s);

  if (!opts.json_path.empty()) {
    Json j = Json::object();
    j.set("device", opts.device.str()).set("steps", opts.steps).set("parameters", model.parameter_count());
    j.set("loss", double(loss)).set("forward_ms_first", first_s * 1e3).set("forward_ms_median", median_ms);
    write_file_atomic(opts.json_path, j.dump());
    std::printf("\nwrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
