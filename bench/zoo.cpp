// The model zoo's four models and their shapes at each size.
#include "bench/zoo.h"

#include <algorithm>
#include <sstream>

namespace kiln::zoo {

namespace {

// A layernorm- and softmax-heavy block: y = ln1(x); s = softmax(y * 2, -1); z = ln2(s + x);
// out = log_softmax(z, -1), all over the last dim.
class NormSoftmax : public nn::Module {
 public:
  explicit NormSoftmax(int64_t width)
      : ln1_(register_module("ln1", std::make_shared<nn::LayerNorm>(width))),
        ln2_(register_module("ln2", std::make_shared<nn::LayerNorm>(width))) {}

  Tensor forward(const Tensor& x) override {
    Tensor s = softmax(ln1_->forward(x) * 2.0, -1);
    return log_softmax(ln2_->forward(s + x), -1);
  }

 private:
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
};

// A model whose forward takes one input tensor and returns one output.
ZooModel single_input(std::string name, std::string description, std::shared_ptr<nn::Module> module,
                      std::function<Tensor()> make_input) {
  module->eval();
  auto forward = [module](const TensorList& in) { return TensorList{module->forward(in.at(0))}; };
  return {std::move(name), std::move(description), module, [make_input] { return TensorList{make_input()}; },
          forward};
}

ZooModel make_mlp(ZooSize size) {
  const bool test = size == ZooSize::test, real = size == ZooSize::real;
  const int64_t batch = test ? 8 : real ? 8192 : 64, width = test ? 64 : real ? 2048 : 1024;
  const int64_t hidden = 4 * width;
  auto module = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(width, hidden), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(hidden, width), std::make_shared<nn::LayerNorm>(width)});
  std::ostringstream d;
  d << "x " << to_string(Shape{batch, width}) << " -> Linear " << width << "->" << hidden << " -> GELU -> Linear "
    << hidden << "->" << width << " -> LayerNorm(" << width << ")";
  return single_input("mlp", d.str(), module, [=] { return randn({batch, width}); });
}

ZooModel make_transformer_block(ZooSize size) {
  const bool test = size == ZooSize::test, real = size == ZooSize::real;
  const int64_t B = test ? 2 : real ? 8 : 4, T = test ? 16 : real ? 1024 : 256;
  const int64_t C = test ? 32 : real ? 1024 : 512, heads = test ? 4 : real ? 16 : 8;
  std::ostringstream d;
  d << "pre-norm transformer block (causal attention + MLP), x " << to_string(Shape{B, T, C}) << ", " << heads
    << " heads";
  return single_input("transformer_block", d.str(), std::make_shared<nn::TransformerBlock>(C, heads),
                      [=] { return randn({B, T, C}); });
}

ZooModel make_norm_softmax(ZooSize size) {
  const bool test = size == ZooSize::test;
  const int64_t rows = test ? 32 : 2048, width = test ? 64 : 1024;
  std::ostringstream d;
  d << "x " << to_string(Shape{rows, width})
    << ": log_softmax(layer_norm(softmax(layer_norm(x) * 2) + x)), learnable norms";
  return single_input("norm_softmax", d.str(), std::make_shared<NormSoftmax>(width),
                      [=] { return randn({rows, width}); });
}

ZooModel make_gpt(const std::string& name, const nn::GptConfig& cfg, int64_t batch) {
  std::ostringstream d;
  d << "TinyGpt (vocab " << cfg.vocab << ", width " << cfg.width << ", " << cfg.heads << " heads, " << cfg.layers
    << " layers" << (cfg.gelu == "tanh" ? ", tanh GELU" : "") << "), tokens " << to_string(Shape{batch, cfg.seq}) << " i64 -> logits "
    << to_string(Shape{batch, cfg.seq, cfg.vocab});
  ZooModel m = single_input(name, d.str(), std::make_shared<nn::TinyGpt>(cfg),
                            [=] { return randint(0, cfg.vocab, {batch, cfg.seq}); });
  m.targets = randint(0, cfg.vocab, {batch * cfg.seq});
  return m;
}

// The demo's configuration (bench/demo.cpp): reversing 8 digits, vocabulary 11, sequence 16.
ZooModel make_tiny_gpt(ZooSize size) {
  return make_gpt("tiny_gpt", {.vocab = 11, .seq = 16, .width = 64, .heads = 4, .layers = 2},
                  size == ZooSize::test ? 4 : 32);
}

// GPT-2 small (124M parameters; the vocabulary padded to 50304 as nanoGPT does), batch 8 x 1024,
// with GPT-2's own GELU (the tanh form, HuggingFace's "gelu_new").
ZooModel make_gpt2_small() {
  return make_gpt("gpt2_small",
                  {.vocab = 50304, .seq = 1024, .width = 768, .heads = 12, .layers = 12, .gelu = "tanh"}, 8);
}

}  // namespace

Tensor ZooModel::loss(const TensorList& outputs) const {
  const Tensor& y = outputs.at(0);
  if (!targets.defined()) return mean(y.to(DType::f32));
  return cross_entropy(y.reshape({-1, y.size(-1)}).to(DType::f32), targets);
}

ZooLossFunction compile_zoo_loss(ZooModel& m, CompileOptions options) {
  return ZooLossFunction([&m](std::vector<Tensor> xs) { return m.loss(m.forward(xs)); }, std::move(options),
                         m.module.get());
}

ZooFunction compile_zoo_model(ZooModel& m, CompileOptions options) {
  return ZooFunction([&m](std::vector<Tensor> xs) { return m.forward(xs); }, std::move(options), m.module.get());
}

std::vector<std::string> zoo_names(ZooSize size) {
  if (size == ZooSize::real) return {"gpt2_small", "mlp", "transformer_block"};
  return {"mlp", "transformer_block", "norm_softmax", "tiny_gpt"};
}

ZooSize parse_zoo_size(const std::string& name) {
  for (ZooSize s : {ZooSize::test, ZooSize::bench, ZooSize::real})
    if (name == zoo_size_name(s)) return s;
  throw_error("zoo: unknown size '", name, "'; known sizes: test, bench, real");
}

const char* zoo_size_name(ZooSize size) {
  return size == ZooSize::test ? "test" : size == ZooSize::bench ? "bench" : "real";
}

ZooModel make_zoo_model(const std::string& name, ZooSize size, Device device) {
  auto on_device = [device](ZooModel m) {
    if (device.is_cpu()) return m;
    m.module->to(device);
    if (m.targets.defined()) m.targets = m.targets.to(device);
    m.make_inputs = [make = m.make_inputs, device] {
      TensorList xs = make();
      for (Tensor& x : xs) x = x.to(device);
      return xs;
    };
    return m;
  };
  std::vector<std::string> names = zoo_names(size);
  if (std::find(names.begin(), names.end(), name) != names.end()) {
    if (name == "mlp") return on_device(make_mlp(size));
    if (name == "transformer_block") return on_device(make_transformer_block(size));
    if (name == "norm_softmax") return on_device(make_norm_softmax(size));
    if (name == "tiny_gpt") return on_device(make_tiny_gpt(size));
    if (name == "gpt2_small") return on_device(make_gpt2_small());
  }
  std::ostringstream known;
  for (const std::string& n : names) known << (known.tellp() > 0 ? ", " : "") << n;
  throw_error("zoo: no model '", name, "' at ", zoo_size_name(size), " size; known models: ", known.str());
}

}  // namespace kiln::zoo
