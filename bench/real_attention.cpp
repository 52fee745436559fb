#include "bench/real_attention.h"

#include <cstdio>

#include "bench/gpu_timing.h"
#include "dsl/dispatch.h"
#include "dsl/eager/attention_cudnn.h"

namespace kiln::bench {

namespace {

struct AttentionCase {
  Shape shape;  // [B, H, T, D]
  DType dtype;
  bool causal;
};

double forward_flops(const Shape& s, bool causal) {
  double f = 4.0 * double(s[0] * s[1]) * double(s[2]) * double(s[2]) * double(s[3]);
  return causal ? f / 2 : f;
}

}  // namespace

Json measure_attention(Device d) {
  std::printf("\n%-22s %-6s %-7s %-9s %10s %10s\n", "attention", "dtype", "causal", "pass", "ms", "TFLOP/s");
  Json rows = Json::array();
  std::vector<AttentionCase> cases;
  for (const Shape& shape : {Shape{8, 12, 1024, 64}, Shape{4, 16, 4096, 64}, Shape{8, 16, 1024, 128}})
    for (DType t : {DType::bf16, DType::f16})
      for (bool causal : {true, false}) cases.push_back({shape, t, causal});
  for (const AttentionCase& c : cases) {
    if (c.dtype == DType::f16 && c.shape != Shape{8, 12, 1024, 64}) continue;  // f16: GPT-2's shape only
    NoGradGuard no_grad;
    TensorOptions opts{c.dtype, d};
    Tensor q = randn(c.shape, opts), k = randn(c.shape, opts), v = randn(c.shape, opts), dout = randn(c.shape, opts);
    const double scale = 1.0 / std::sqrt(double(c.shape[3]));
    const Attrs attrs{{"scale", scale}, {"causal", c.causal}};
    TensorList fwd = dispatch(op_def("attention"), {q, k, v}, attrs);
    const double flops = forward_flops(c.shape, c.causal);
    for (const char* pass : {"forward", "backward"}) {
      bool backward = std::string(pass) == "backward";
      double ms = backward ? device_ms([&] { dispatch(op_def("attention_backward"), {q, k, v, fwd[0], dout, fwd[1]}, attrs); })
                           : device_ms([&] { dispatch(op_def("attention"), {q, k, v}, attrs); });
      double tflops = (backward ? 2.5 * flops : flops) / (ms * 1e-3) / 1e12;
      std::printf("%-22s %-6s %-7s %-9s %10.3f %10.1f\n", to_string(c.shape).c_str(), std::string(name(c.dtype)).c_str(),
                  c.causal ? "yes" : "no", pass, ms, tflops);
      Json j = Json::object();
      Json shape = Json::array();
      for (int64_t s : c.shape) shape.push(s);
      j.set("shape", shape);
      j.set("dtype", std::string(name(c.dtype)));
      j.set("causal", c.causal);
      j.set("pass", std::string(pass));
      j.set("kiln_ms", ms);
      j.set("kiln_tflops", tflops);
      rows.push(j);
    }
  }
  for (const std::string& plan : cudnn_attention_plans()) std::printf("  cuDNN plan: %s\n", plan.c_str());
  return rows;
}

}  // namespace kiln::bench
