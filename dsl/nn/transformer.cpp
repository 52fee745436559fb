#include "dsl/nn/transformer.h"

#include <cmath>

#include "dsl/creation.h"
#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln::nn {

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads) : width_(width), heads_(heads) {
  KILN_CHECK(heads > 0 && width % heads == 0, "nn::CausalSelfAttention: width ", width,
             " must be a multiple of the number of heads ", heads);
  qkv_ = register_module("qkv", std::make_shared<Linear>(width, 3 * width));
  proj_ = register_module("proj", std::make_shared<Linear>(width, width));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  KILN_CHECK(x.dim() == 3 && x.impl().shape[2] == width_, "nn::CausalSelfAttention: expects (B, T, ", width_,
             "), got ", to_string(x.impl().shape));
  // Only T is read on the host (for the causal mask); B stays symbolic in a compiled graph.
  int64_t D = width_ / heads_;
  Tensor qkv = qkv_->forward(x);
  auto heads = [&](int64_t i) { return qkv.narrow(-1, i * width_, width_).unflatten(-1, {heads_, D}).transpose(1, 2); };
  Tensor y = scaled_dot_product_attention(heads(0), heads(1), heads(2), /*causal=*/true);
  return proj_->forward(y.transpose(1, 2).flatten(2));
}

TransformerBlock::TransformerBlock(int64_t width, int64_t heads, std::string gelu) : gelu_(std::move(gelu)) {
  KILN_CHECK(gelu_ == "none" || gelu_ == "tanh", "nn::TransformerBlock: gelu must be 'none' or 'tanh', got '", gelu_,
             "'");
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(width));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(width, heads));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(width));
  fc_ = register_module("fc", std::make_shared<Linear>(width, 4 * width));
  proj_ = register_module("proj", std::make_shared<Linear>(4 * width, width));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = x + attn_->forward(ln1_->forward(x));
  return h + proj_->forward(gelu(fc_->forward(ln2_->forward(h)), gelu_));
}

TinyGpt::TinyGpt(const GptConfig& cfg) : cfg_(cfg) {
  wte_ = register_module("wte", std::make_shared<Embedding>(cfg.vocab, cfg.width));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(cfg.seq, cfg.width));
  for (int64_t l = 0; l < cfg.layers; ++l)
    blocks_.push_back(register_module("blocks." + std::to_string(l), std::make_shared<TransformerBlock>(cfg.width, cfg.heads, cfg.gelu)));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(cfg.width));
  head_ = register_module("head", std::make_shared<Linear>(cfg.width, cfg.vocab, /*bias=*/false));
  // GPT-2's initialisation: small normal embeddings.
  for (Tensor* t : {&wte_->weight, &wpe_->weight}) t->detach().copy_(randn(t->shape()) * 0.02);
}

Tensor TinyGpt::forward(const Tensor& tokens) {
  KILN_CHECK(tokens.dim() == 2 && tokens.impl().shape[1] <= cfg_.seq, "nn::TinyGpt: expects (B, T <= ",
             cfg_.seq, ") token ids, got ", to_string(tokens.impl().shape));
  Tensor pos = arange(0, double(tokens.size(1)), 1, {.dtype = DType::i64, .device = tokens.device()});
  Tensor x = wte_->forward(tokens) + wpe_->forward(pos);
  for (const auto& b : blocks_) x = b->forward(x);
  return head_->forward(ln_f_->forward(x));
}

}  // namespace kiln::nn
