// Differential fuzzing of kiln::compile: random programs of Tensor ops (support/fuzz_program.h)
// must give the same results compiled and eagerly, on fresh random inputs, within each dtype's
// tolerance; the second call must hit the cache, and in dynamic programs a second batch size must
// reuse the graph. On a difference the test prints the seed and the program as C++.
//
// KILN_FUZZ_BACKEND picks the backend (else KILN_BACKEND, else "eager"; "fuzz_decomposed" is the
// eager backend after every decomposition), KILN_FUZZ_PROGRAMS / KILN_FUZZ_FIRST_SEED the seeds
// (default 2000 programs on "eager", 100 on others, which compile for real), KILN_FUZZ_SCHEDULER
// the halide backend's scheduler (kiln, mullapudi2016, adams2019, li2018), e.g.
//   KILN_FUZZ_BACKEND=halide KILN_FUZZ_PROGRAMS=1000 build/bin/test_graph_fuzz_compile
// KILN_FUZZ_PRINT=1 prints each program before it runs (for crashes); KILN_FUZZ_LOW_PRECISION=1
// generates the programs of the CUDA suite (f16 and bf16 values too) in compiled_programs_match_eager.
// tests/CMakeLists.txt runs the halide backend in CI as shards of this program (fuzz_halide_*).
#include <array>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "graph/backend.h"
#include "graph/passes.h"
#include "support/fuzz_compare.h"
#include "support/fuzz_program.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
uint64_t env_count(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

std::string fuzz_backend() { return env_string("KILN_FUZZ_BACKEND", env_string("KILN_BACKEND", "eager")); }
// Programs per case: the eager backend runs 2000 in about a second.
uint64_t fuzz_programs(const std::string& backend_name) {
  return env_count("KILN_FUZZ_PROGRAMS", backend_name == "eager" || backend_name == "fuzz_decomposed" ? 2000 : 100);
}

// The eager backend after every decomposition kiln knows: fuzzes decompose() too.
class DecomposedBackend final : public Backend {
 public:
  std::string_view name() const override { return "fuzz_decomposed"; }
  std::set<std::string> decompositions() const override {
    std::vector<std::string> all = default_decompositions();
    return {all.begin(), all.end()};
  }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    return backend("eager").compile(std::move(g), o);
  }
};

// The eager backend with wrong float results (x * 1.05 + 0.05): the fuzzer must notice.
class SabotagedGraph final : public CompiledGraph {
 public:
  explicit SabotagedGraph(std::shared_ptr<CompiledGraph> g) : g_(std::move(g)) {}
  TensorList run(const TensorList& inputs) const override {
    TensorList out = g_->run(inputs);
    for (Tensor& t : out)
      if (is_floating(t.dtype())) t = t * 1.05 + 0.05;
    return out;
  }
  int kernel_count() const override { return g_->kernel_count(); }

 private:
  std::shared_ptr<CompiledGraph> g_;
};
class SabotagedBackend final : public Backend {
 public:
  std::string_view name() const override { return "fuzz_sabotaged"; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    return std::make_shared<SabotagedGraph>(backend("eager").compile(std::move(g), o));
  }
};

void register_test_backends() {
  static bool done = [] {
    register_backend(std::make_shared<DecomposedBackend>());
    register_backend(std::make_shared<SabotagedBackend>());
    return true;
  }();
  (void)done;
}

// The first difference between compiled and eager runs of `p`, or "" when they agree. Two calls on
// different inputs: the second must hit the cache. With `batch2` > 0 (dynamic programs), dim 0 of
// every input of the first call is marked dynamic and the second call has that batch size (one
// recompile is allowed when the program's layout may depend on it).
std::string run_and_compare(const FuzzProgram& p, const std::string& backend_name, int64_t batch2, bool widen) {
  std::vector<TensorList> inputs{make_inputs(p, 2 * p.seed + 1), make_inputs(p, 2 * p.seed + 2, batch2)};
  if (batch2 > 0)
    for (const Tensor& x : inputs[0]) mark_dynamic(x, 0);
  auto f = compile([&p](std::vector<Tensor> xs) { return run_program(p, xs); },
                   {.backend = backend_name, .scheduler = env_string("KILN_FUZZ_SCHEDULER", "kiln"),
                    .name = "fuzz program " + std::to_string(p.seed)});
  for (int call = 0; call < 2; ++call) {
    std::string at = "call " + std::to_string(call + 1);
    int64_t batch = call == 1 && batch2 > 0 ? batch2 : p.batch;
    TensorList want, got;
    try {
      manual_seed(p.seed + uint64_t(call));
      want = run_program(p, inputs[size_t(call)]);
    } catch (const std::exception& e) {
      return at + ": the eager run threw (a generator bug): " + e.what();
    }
    for (size_t i = 0; i < want.size(); ++i) {  // the generator's model of the program
      const FuzzOutput& o = p.outputs[i];
      std::ostringstream os;
      if (want[i].dtype() != o.dtype || want[i].shape() != expected_shape(p, i, batch))
        os << "eager output " << i << " is " << want[i].dtype() << " " << to_string(want[i].shape())
           << ", the generator expected " << o.dtype << " " << to_string(expected_shape(p, i, batch));
      for (double x : host_values(want[i]))
        if (!std::isfinite(x)) {
          os << "eager output " << i << " holds " << x;
          break;
        }
      if (!os.str().empty()) return at + ": " + os.str() + " (a generator bug)";
    }
    try {
      manual_seed(p.seed + uint64_t(call));
      got = f(inputs[size_t(call)]);
    } catch (const std::exception& e) {
      return at + ": the compiled call threw: " + e.what();
    }
    if (got.size() != want.size())
      return at + ": " + std::to_string(got.size()) + " outputs, want " + std::to_string(want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::string d = mismatch(got[i], want[i], output_tolerance(p.outputs[i], want[i], widen));
      if (!d.empty()) return at + ", output " + std::to_string(i) + " (v" + std::to_string(p.outputs[i].value) + "): " + d;
    }
  }
  CompileStats s = f.stats();
  if (p.layout_dependent && s.compiles == 2 && s.recompiles == 1) return "";  // the batch was specialized
  if (s.compiles != 1 || s.recompiles != 0 || s.cache_hits != 1) {
    std::string why = "expected 1 compile and 1 cache hit, got " + std::to_string(s.compiles) + " compiles, " +
                      std::to_string(s.cache_hits) + " cache hits, " + std::to_string(s.recompiles) + " recompiles";
    for (const std::string& r : s.recompile_reasons) why += " [" + r + "]";
    return why;
  }
  return "";
}

// Gradient mode: every float input requires grad and the loss weighs every float output with fixed
// random weights (in f64); the compiled function's gradients (its joint graph, cut and compiled
// on a backend without autograd of its own) must equal the eager tape's, and its tape must keep
// no more bytes than the eager one. Returns "" when they agree, "skip" when nothing is
// differentiable, else the first difference.
std::string compare_gradients(const FuzzProgram& p, const std::string& backend_name) {
  TensorList xs = make_inputs(p, 2 * p.seed + 1);
  TensorList leaves;
  for (Tensor& x : xs)
    if (is_floating(x.dtype())) leaves.push_back(x.requires_grad_());
  auto loss_of = [&](const TensorList& outs) {
    Tensor loss;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].requires_grad()) continue;
      Tensor w = random_tensor(outs[i].shape(), DType::f64, 7 * p.seed + i);
      Tensor term = (outs[i].to(DType::f64) * w).sum();
      loss = loss.defined() ? loss + term : term;
    }
    return loss;
  };
  std::vector<int64_t> saved_bytes;  // what each tape keeps for backward (the inputs aside)
  auto gradients = [&](const std::function<TensorList(const TensorList&)>& run) -> TensorList {
    for (Tensor& x : leaves) x.set_grad(Tensor());
    manual_seed(p.seed);
    Tensor loss = loss_of(run(xs));
    if (!loss.defined()) return {};
    saved_bytes.push_back(tape_saved_bytes(loss, xs));
    loss.backward();
    TensorList g;
    for (Tensor& x : leaves) g.push_back(x.grad().defined() ? x.grad() : zeros(x.shape(), x.options()));
    return g;
  };
  TensorList want;
  try {
    want = gradients([&](const TensorList& in) { return run_program(p, in); });
  } catch (const std::exception& e) {
    return "skip";  // an op without a derivative rule: eager cannot differentiate it either
  }
  if (want.empty()) return "skip";
  auto f = compile([&p](std::vector<Tensor> in) { return run_program(p, in); },
                   {.backend = backend_name, .name = "fuzz gradients " + std::to_string(p.seed)});
  TensorList got;
  try {
    got = gradients([&](const TensorList& in) { return f(in); });
  } catch (const std::exception& e) {
    return std::string("the compiled backward threw: ") + e.what();
  }
  if (saved_bytes.size() == 2 && saved_bytes[1] > saved_bytes[0])
    return "the compiled forward saves " + std::to_string(saved_bytes[1]) + " bytes, the eager tape " +
           std::to_string(saved_bytes[0]);
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 1;
    for (double v : host_values(want[i])) scale = std::max(scale, std::abs(v));
    std::string d = mismatch(got[i], want[i], {2e-3, 2e-4 * scale});
    if (!d.empty()) return "gradient of input " + std::to_string(i) + ": " + d;
  }
  return "";
}

struct FuzzSummary {
  std::map<std::string, int> steps;  // per fuzz_step_name
  int layout_dependent = 0;          // dynamic programs allowed to recompile once
  std::string coverage() const {
    std::string s;
    for (const std::string& name : fuzz_step_names()) {
      auto it = steps.find(name);
      s += (s.empty() ? "" : ", ") + name + " " + std::to_string(it == steps.end() ? 0 : it->second);
    }
    return s;
  }
};

// Runs `count` programs from `first_seed` and reports each difference (the first five with their
// program).
FuzzSummary fuzz(uint64_t first_seed, uint64_t count, const FuzzConfig& config, const std::string& backend_name,
                 bool widen) {
  FuzzSummary sum;
  int failures = 0;
  for (uint64_t seed = first_seed; seed < first_seed + count; ++seed) {
    FuzzProgram p = generate_program(seed, config);
    for (const FuzzStep& s : p.steps) ++sum.steps[fuzz_step_name(s)];
    sum.layout_dependent += p.layout_dependent;
    if (std::getenv("KILN_FUZZ_PRINT"))  // a crash prints nothing else: the program first
      std::cerr << "seed " << seed << ":\n" << program_to_cpp(p) << std::flush;
    int64_t batch2 = p.dynamic ? p.batch + 1 + int64_t(seed % 3) : 0;
    std::string diff = run_and_compare(p, backend_name, batch2, widen);
    if (diff.empty()) continue;
    if (failures++ < 5)
      BOOST_ERROR("seed " << seed << ", backend " << backend_name << (p.dynamic ? ", dynamic" : "") << ": " << diff
                          << "\n" << program_to_cpp(p));
    else
      BOOST_ERROR("seed " << seed << ", backend " << backend_name << ": " << diff);
  }
  BOOST_TEST(failures == 0, failures << " of " << count << " programs differ on backend " << backend_name);
  return sum;
}

}  // namespace

BOOST_AUTO_TEST_CASE(compiled_programs_match_eager) {
  register_test_backends();
  std::string b = fuzz_backend();
  uint64_t count = fuzz_programs(b), first = env_count("KILN_FUZZ_FIRST_SEED", 0);
  FuzzConfig config;
  config.low_precision = std::getenv("KILN_FUZZ_LOW_PRECISION") != nullptr;  // the CUDA suite's programs
  FuzzSummary sum = fuzz(first, count, config, b, b != "eager");
  BOOST_TEST_MESSAGE(count << " programs on backend " << b << "; steps per op: " << sum.coverage());
  if (count >= 200)  // a generator that silently stopped emitting an op would test nothing there
    for (const std::string& name : fuzz_step_names())
      BOOST_TEST(sum.steps[name] > 0, name << " never generated");
}

BOOST_AUTO_TEST_CASE(dynamic_batch_programs_match_eager_without_recompiling) {
  register_test_backends();
  std::string b = fuzz_backend();
  uint64_t count = fuzz_programs(b) / 2, first = env_count("KILN_FUZZ_FIRST_SEED", 0);
  FuzzSummary sum = fuzz(1'000'000 + first, count, {.dynamic = true}, b, b != "eager");
  BOOST_TEST_MESSAGE(count << " dynamic programs on backend " << b << " (" << sum.layout_dependent
                           << " allowed one recompile); steps per op: " << sum.coverage());
}

BOOST_AUTO_TEST_CASE(decomposed_programs_match_eager) {
  register_test_backends();
  uint64_t count = fuzz_programs("fuzz_decomposed") / 4, first = env_count("KILN_FUZZ_FIRST_SEED", 0);
  fuzz(2'000'000 + first, count, {}, "fuzz_decomposed", true);
}

BOOST_AUTO_TEST_CASE(compiled_gradients_match_eager) {
  register_test_backends();
  std::string b = fuzz_backend();
  uint64_t count = fuzz_programs(b) / 2, first = env_count("KILN_FUZZ_FIRST_SEED", 0);
  int compared = 0, failures = 0;
  for (uint64_t seed = 3'000'000 + first; seed < 3'000'000 + first + count; ++seed) {
    FuzzProgram p = generate_program(seed, {.low_precision = false});
    if (std::getenv("KILN_FUZZ_PRINT")) std::cerr << "seed " << seed << ":\n" << program_to_cpp(p) << std::flush;
    std::string diff = compare_gradients(p, b);
    if (diff == "skip") continue;
    ++compared;
    if (diff.empty()) continue;
    if (failures++ < 5) BOOST_ERROR("seed " << seed << ", backend " << b << ": " << diff << "\n" << program_to_cpp(p));
    else BOOST_ERROR("seed " << seed << ", backend " << b << ": " << diff);
  }
  BOOST_TEST(failures == 0, failures << " of " << compared << " programs' gradients differ on backend " << b);
  BOOST_TEST(compared >= int(count) / 2, "only " << compared << " of " << count << " programs were differentiable");
  BOOST_TEST_MESSAGE(compared << " programs' gradients compared on backend " << b);
}

BOOST_AUTO_TEST_CASE(the_check_fails_on_wrong_results) {
  register_test_backends();
  // The comparison: a program's f32 output against itself passes; with one element moved by 1% of
  // the largest one, or another dtype or shape, it fails, even at the widest tolerance used.
  FuzzProgram p;
  for (uint64_t seed = 0; p.outputs.empty() || p.outputs[0].precision != DType::f32 || !is_floating(p.outputs[0].dtype); ++seed)
    p = generate_program(seed, {.random_ops = false});
  Tensor want = run_program(p, make_inputs(p, 1))[0];
  Tolerance tol = output_tolerance(p.outputs[0], want, true);
  BOOST_TEST(mismatch(want, want, tol).empty());
  std::vector<double> v = host_values(want);
  double scale = 0;
  for (double x : v) scale = std::max(scale, std::abs(x));
  v[v.size() / 2] += 0.01 * std::max(scale, 1.0);
  Tensor bad = Tensor::empty(want.shape(), {want.dtype()});
  for (size_t i = 0; i < v.size(); ++i) store_from_double(bad.data_ptr(), bad.dtype(), int64_t(i), v[i]);
  BOOST_TEST(!mismatch(bad, want, tol).empty());
  BOOST_TEST(!mismatch(cast(want, want.dtype() == f64 ? f32 : f64), want, tol).empty());
  BOOST_TEST(!mismatch(unsqueeze(want, 0), want, tol).empty());
  Tensor ints = random_tensor({3, 4}, i32, 5);
  BOOST_TEST(mismatch(ints, ints, {0, 0}).empty());
  BOOST_TEST(!mismatch(ints + 1, ints, {0, 0}).empty());

  // End to end: a backend whose float results are 5% off fails every program with a float output.
  int checked = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    FuzzProgram q = generate_program(seed, {});
    bool has_float = false;
    for (const FuzzOutput& o : q.outputs) has_float = has_float || is_floating(o.dtype);
    if (!has_float) continue;
    ++checked;
    BOOST_TEST(!run_and_compare(q, "fuzz_sabotaged", 0, false).empty(), "seed " << seed);
    BOOST_TEST(run_and_compare(q, "eager", 0, false).empty(), "seed " << seed);
  }
  BOOST_TEST(checked >= 10);
}
