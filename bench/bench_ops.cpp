// `kiln bench ops`: for each op, the median eager time on a one-element input (host overhead)
// and on a large input (throughput in GB/s, or GFLOP/s for matmul), beside an Eigen matmul on
// the same problem, and the time from process start to the first op's result.
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <iostream>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "dsl/eager/eigen_gemm.h"
#include "kiln.h"

extern char** environ;

namespace kiln::bench {

namespace {

struct OpBench {
  std::string name;
  std::function<Tensor()> small, large;
  Shape large_shape;
  double large_bytes = 0;  // moved per call (read + written); 0: report flops
  double large_flops = 0;
};

double f32_bytes(const Shape& s) { return double(numel(s)) * 4; }

std::vector<OpBench> op_benches() {
  const Shape big{2048, 2048};  // 4M elements, 16 MB in f32
  const double n = f32_bytes(big);
  auto x1 = std::make_shared<Tensor>(randn({1}));
  auto y1 = std::make_shared<Tensor>(randn({1}));
  auto x = std::make_shared<Tensor>(randn(big));
  auto y = std::make_shared<Tensor>(randn(big));
  auto xp = std::make_shared<Tensor>(rand(big) + 0.1);
  auto xp1 = std::make_shared<Tensor>(rand({1}) + 0.1);
  std::vector<OpBench> out;

  auto unary = [&](std::string name, Tensor (*f)(const Tensor&), bool positive) {
    auto in1 = positive ? xp1 : x1;
    auto in = positive ? xp : x;
    out.push_back({name, [=] { return f(*in1); }, [=] { return f(*in); }, big, 2 * n});
  };
  unary("neg", neg, false);
  unary("abs", abs, false);
  unary("exp", exp, false);
  unary("log", log, true);
  unary("sqrt", sqrt, true);
  unary("rsqrt", rsqrt, true);
  unary("sin", sin, false);
  unary("cos", cos, false);
  unary("tanh", tanh, false);
  unary("sigmoid", sigmoid, false);
  unary("relu", relu, false);
  unary("silu", silu, false);
  unary("reciprocal", reciprocal, true);
  unary("square", square, false);
  out.push_back({"gelu", [=] { return gelu(*x1); }, [=] { return gelu(*x); }, big, 2 * n});
  out.push_back({"gelu_tanh", [=] { return gelu(*x1, "tanh"); }, [=] { return gelu(*x, "tanh"); }, big, 2 * n});

  auto binary = [&](std::string name, Tensor (*f)(const Tensor&, const Tensor&), double out_bytes) {
    out.push_back({name, [=] { return f(*x1, *y1); }, [=] { return f(*x, *y); }, big, 2 * n + out_bytes});
  };
  binary("add", add, n);
  binary("sub", sub, n);
  binary("mul", mul, n);
  binary("div", div, n);
  binary("pow", pow, n);
  binary("maximum", maximum, n);
  binary("minimum", minimum, n);
  for (auto [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}})
    binary(name, f, n / 4);
  auto c = std::make_shared<Tensor>(gt(*x, 0.0));
  auto c1 = std::make_shared<Tensor>(gt(*x1, 0.0));
  out.push_back({"where", [=] { return where(*c1, *x1, *y1); }, [=] { return where(*c, *x, *y); }, big, 3 * n + n / 4});
  out.push_back({"cast_f16", [=] { return x1->to(f16); }, [=] { return x->to(f16); }, big, n * 1.5});

  auto reduction = [&](std::string name, std::function<Tensor(const Tensor&)> f) {
    out.push_back({name, [=] { return f(*x1); }, [=] { return f(*x); }, big, n});
  };
  reduction("sum", [](const Tensor& t) { return sum(t, {-1}); });
  reduction("sum_dim0", [](const Tensor& t) { return sum(t, {0}); });
  reduction("sum_all", [](const Tensor& t) { return sum(t); });
  reduction("mean", [](const Tensor& t) { return mean(t, {-1}); });
  reduction("max", [](const Tensor& t) { return max(t, {-1}); });
  reduction("min", [](const Tensor& t) { return min(t, {-1}); });
  reduction("argmax", [](const Tensor& t) { return argmax(t, -1); });
  reduction("var", [](const Tensor& t) { return var(t, {-1}); });
  reduction("logsumexp", [](const Tensor& t) { return logsumexp(t, {-1}); });
  out.push_back({"softmax", [=] { return softmax(*x1, -1); }, [=] { return softmax(*x, -1); }, big, 2 * n});
  out.push_back({"log_softmax", [=] { return log_softmax(*x1, -1); }, [=] { return log_softmax(*x, -1); }, big, 2 * n});
  auto w = std::make_shared<Tensor>(randn({2048}));
  auto b = std::make_shared<Tensor>(randn({2048}));
  auto w1 = std::make_shared<Tensor>(randn({1}));
  out.push_back({"layer_norm", [=] { return layer_norm(*x1, {1}, *w1, *w1); },
                 [=] { return layer_norm(*x, {2048}, *w, *b); }, big, 2 * n});

  const Shape logits_shape{4096, 1000};
  auto logits = std::make_shared<Tensor>(randn(logits_shape));
  auto targets = std::make_shared<Tensor>(randint(0, 1000, {4096}));
  auto logits1 = std::make_shared<Tensor>(randn({1, 1}));
  auto targets1 = std::make_shared<Tensor>(zeros({1}, {.dtype = i64}));
  out.push_back({"cross_entropy", [=] { return cross_entropy(*logits1, *targets1); },
                 [=] { return cross_entropy(*logits, *targets); }, logits_shape, f32_bytes(logits_shape)});

  const int64_t m = 1024;
  auto a = std::make_shared<Tensor>(randn({m, m}));
  auto bm = std::make_shared<Tensor>(randn({m, m}));
  auto a1 = std::make_shared<Tensor>(randn({1, 1}));
  out.push_back({"matmul", [=] { return matmul(*a1, *a1); }, [=] { return matmul(*a, *bm); }, {m, m, m}, 0,
                 2.0 * m * m * m});
  auto cm = std::make_shared<Tensor>(empty({m, m}));
  auto cm1 = std::make_shared<Tensor>(empty({1, 1}));
  out.push_back({"eigen_matmul",
                 [=] {
                   eigen_gemm(*a1, *a1, *cm1);
                   return *cm1;
                 },
                 [=] {
                   eigen_gemm(*a, *bm, *cm);
                   return *cm;
                 },
                 {m, m, m}, 0, 2.0 * m * m * m});
  auto lw = std::make_shared<Tensor>(randn({1024, 1024}));
  auto lb = std::make_shared<Tensor>(randn({1024}));
  auto lx = std::make_shared<Tensor>(randn({512, 1024}));
  out.push_back({"linear", [=] { return linear(*a1, *a1, *w1); }, [=] { return linear(*lx, *lw, *lb); },
                 {512, 1024, 1024}, 0, 2.0 * 512 * 1024 * 1024});

  auto table = std::make_shared<Tensor>(randn({32000, 512}));
  auto idx = std::make_shared<Tensor>(randint(0, 32000, {8192}));
  auto idx1 = std::make_shared<Tensor>(zeros({1}, {.dtype = i64}));
  out.push_back({"embedding", [=] { return embedding(*table, *idx1); }, [=] { return embedding(*table, *idx); },
                 {8192, 512}, 2 * f32_bytes({8192, 512}) + 8 * 8192});

  auto xt = std::make_shared<Tensor>(x->t());
  auto x1t = std::make_shared<Tensor>(x1->t());
  out.push_back({"contiguous", [=] { return contiguous(*x1t); }, [=] { return contiguous(*xt); }, big, 2 * n});
  auto half1 = std::make_shared<Tensor>(x->narrow(1, 0, 1024).contiguous());
  auto half2 = std::make_shared<Tensor>(y->narrow(1, 0, 1024).contiguous());
  out.push_back({"cat", [=] { return cat({*x1, *y1}, 0); }, [=] { return cat({*half1, *half2}, 1); }, big, 2 * n});
  out.push_back({"stack", [=] { return stack({*x1, *y1}, 0); }, [=] { return stack({*half1, *half2}, 0); },
                 {2, 2048, 1024}, 2 * n});
  auto x11 = std::make_shared<Tensor>(x1->reshape({1, 1}));
  auto view_op = [&](std::string name, std::function<Tensor(const Tensor&)> f) {
    out.push_back({name, [=] { return f(*x11); }, [=] { return f(*x); }, big, 0});
  };
  view_op("reshape", [](const Tensor& t) { return t.reshape({-1}); });
  view_op("view", [](const Tensor& t) { return t.view({-1}); });
  view_op("permute", [](const Tensor& t) { return t.unsqueeze(0).permute({1, 2, 0}); });
  view_op("transpose", [](const Tensor& t) { return t.unsqueeze(0).transpose(0, 1); });
  view_op("expand", [](const Tensor& t) { return t.unsqueeze(0).expand({4, -1, -1}); });
  view_op("squeeze", [](const Tensor& t) { return t.unsqueeze(0).squeeze(0); });
  view_op("unsqueeze", [](const Tensor& t) { return t.unsqueeze(0); });
  view_op("slice", [](const Tensor& t) { return t.slice(0, 0, 1); });
  view_op("narrow", [](const Tensor& t) { return t.narrow(0, 0, 1); });
  return out;
}

// Wall time of a fresh process that runs one op and prints its result: process start, dynamic
// loading, kiln's start-up and the first kernel call.
double cold_first_op_us(const std::string& self) {
  std::vector<double> runs;
  for (int i = 0; i < 5; ++i) {
    pid_t pid;
    char* argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>("bench"), const_cast<char*>("first-op"), nullptr};
    double t0 = now_seconds();
    KILN_CHECK(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ) == 0, "bench: cannot start ", self);
    int status = 0;
    waitpid(pid, &status, 0);
    double t1 = now_seconds();
    KILN_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench: first-op child failed");
    runs.push_back((t1 - t0) * 1e6);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int run_first_op() {
  Tensor x = full({1}, 0.5);
  std::printf("first op: exp(0.5) = %.6f\n", exp(x).item<float>());
  return 0;
}

int run_bench_ops(const BenchOptions& opts) {
  KILN_CHECK(opts.device.is_cpu(), "bench ops: --device ", opts.device, " is not measured per op yet; `kiln bench gpu` "
             "times kernels and models on CUDA");
  manual_seed(0);
  Json report = Json::object();
  report.set("suite", "ops").set("device", opts.device.str());
  double cold = cold_first_op_us(opts.self_path);
  report.set("cold_first_op_us", cold);
  std::printf("kiln bench ops (device %s): median eager times after warm-up\n", opts.device.str().c_str());
  std::printf("cold first op in a fresh process: %.0f us\n\n", cold);
  std::printf("%-14s %12s %18s %12s %12s\n", "op", "small (us)", "large shape", "large (us)", "rate");
  Json ops = Json::array();
  for (const OpBench& b : op_benches()) {
    if (!opts.filter.empty() && b.name.find(opts.filter) == std::string::npos) continue;
    Timing small = time_median([&] { b.small(); }, 200, 20, 25, 0.05);
    Timing large = time_median([&] { b.large(); }, 1, 2, 10, 0.3, 200);
    Json e = Json::object();
    e.set("op", b.name).set("small_median_us", small.median_s * 1e6);
    Json shape = Json::array();
    for (int64_t d : b.large_shape) shape.push(d);
    e.set("large_shape", shape).set("large_median_us", large.median_s * 1e6);
    char rate[32] = "-";
    if (b.large_flops > 0) {
      double gflops = b.large_flops / large.median_s * 1e-9;
      e.set("gflops", gflops);
      std::snprintf(rate, sizeof rate, "%.1f GFLOP/s", gflops);
    } else if (b.large_bytes > 0) {
      double gbps = b.large_bytes / large.median_s * 1e-9;
      e.set("gbps", gbps);
      std::snprintf(rate, sizeof rate, "%.1f GB/s", gbps);
    }
    std::printf("%-14s %12.2f %18s %12.1f %12s\n", b.name.c_str(), small.median_s * 1e6,
                to_string(b.large_shape).c_str(), large.median_s * 1e6, rate);
    std::fflush(stdout);
    ops.push(e);
  }
  report.set("ops", ops);
  if (!opts.json_path.empty()) {
    write_file_atomic(opts.json_path, report.dump());
    std::printf("\nwrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
