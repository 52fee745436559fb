// Transformer modules: causal multi-head self-attention, a pre-norm block, and a tiny GPT
// (token and position embeddings, N blocks, a final norm, a head over the vocabulary).
//
//   nn::TinyGpt gpt({.vocab = 12, .seq = 16, .width = 64, .heads = 4, .layers = 2});
//   Tensor logits = gpt.forward(tokens);   // (B, T) i64 -> (B, T, vocab)
#pragma once
#include <string>

#include "dsl/nn/layers.h"

namespace kiln::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t width, int64_t heads);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)

 private:
  int64_t width_, heads_;
  std::shared_ptr<Linear> qkv_, proj_;
};

class TransformerBlock : public Module {
 public:
  // gelu: the MLP's GELU, "none" (the exact erf form) or "tanh" (GPT-2's own approximation).
  TransformerBlock(int64_t width, int64_t heads, std::string gelu = "none");
  Tensor forward(const Tensor& x) override;  // x + attn(ln1(x)), then + mlp(ln2(.))

 private:
  std::string gelu_;
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Linear> fc_, proj_;
};

struct GptConfig {
  int64_t vocab = 64, seq = 64, width = 128, heads = 4, layers = 2;
  std::string gelu = "none";  // the blocks' GELU: "none" (erf) or "tanh" (GPT-2's form)
};

class TinyGpt : public Module {
 public:
  explicit TinyGpt(const GptConfig& cfg);
  Tensor forward(const Tensor& tokens) override;
  const GptConfig& config() const { return cfg_; }

 private:
  GptConfig cfg_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> head_;
};

}  // namespace kiln::nn
