// The compile path around a captured graph: the passes a backend asks for, the logs and the
// debug dump.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/backend.h"
#include "graph/passes.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The eager backend, behind a backend that asks for every decomposition: what it runs is the
// primitive-op form of the graph.
class DecomposingBackend final : public Backend {
 public:
  std::string_view name() const override { return "test_decomposed"; }
  std::set<std::string> decompositions() const override {
    auto d = default_decompositions();
    return {d.begin(), d.end()};
  }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    seen_ops.clear();
    for (const GraphNode& n : g->nodes) seen_ops.insert(n.op->name);
    return backend("eager").compile(g, o);
  }
  static inline std::set<std::string> seen_ops;
};

struct CaptureStderr {
  std::ostringstream text;
  std::streambuf* old = std::cerr.rdbuf(text.rdbuf());
  ~CaptureStderr() { std::cerr.rdbuf(old); }
};

Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor h = layer_norm(x, {x.impl().shape.back()}, w, b);
  return softmax(gelu(h, "tanh"), -1) + log_softmax(h, 0);
}

std::string slurp(const std::filesystem::path& p) { return file_bytes(p.string()); }

}  // namespace

BOOST_AUTO_TEST_CASE(backend_decompositions_keep_results) {
  register_backend(std::make_shared<DecomposingBackend>());
  Tensor w = random_tensor({12}, f32, 1), b = random_tensor({12}, f32, 2);
  auto f = compile([&](const Tensor& x) { return composite(x, w, b); }, {.backend = "test_decomposed"});
  Tensor x = random_tensor({5, 12}, f32, 3);
  check_close(f(x), host_values(composite(x, w, b)), {5, 12}, "decomposed graph");
  for (const char* op : {"softmax", "log_softmax", "layer_norm"})
    BOOST_TEST(DecomposingBackend::seen_ops.count(op) == 0u, op << " reached the backend");
  BOOST_TEST(DecomposingBackend::seen_ops.count("exp") == 1u);
  check_error([] { compile([](const Tensor& x) { return x; }, {.backend = "nope"}); }, {"nope", "eager"});
}

BOOST_AUTO_TEST_CASE(logs_say_where) {
  check_error([] { set_logs("graph_breaks,nonsense"); }, {"nonsense", "recompiles", "graph_breaks"});
  set_logs("graph_breaks,recompiles");
  auto f = compile([](const Tensor& x) {
    int line = __LINE__ + 1;
    float s = x.sum().item<float>();
    return std::make_pair(x * s, full({}, double(line)));
  }, {.name = "logged"});
  CaptureStderr cap;
  auto [y, line] = f(random_tensor({3}, f32, 1));
  f(random_tensor({4}, f32, 2));
  set_logs("");
  std::string text = cap.text.str();
  std::string where = "test_compile_path.cpp:" + std::to_string(int(line.item<float>()));
  BOOST_TEST(text.find("[kiln:graph_breaks] " + where + ": item()") != std::string::npos, text);
  BOOST_TEST(text.find("[kiln:recompiles] logged: recompiling: arg 0 dim 0: 3 -> 4") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(debug_dir_gets_every_graph) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  set_debug_dir(dir.string());
  auto f = compile([](const Tensor& x) { return exp(x) + exp(x); }, {.name = "dumped"});
  f(random_tensor({2, 3}, f32, 1));
  set_debug_dir("");
  std::string captured = slurp(dir / "dumped_graph_1.captured.txt");
  std::string optimized = slurp(dir / "dumped_graph_1.optimized.txt");
  BOOST_TEST(captured.find("exp(%0)") != std::string::npos, captured);
  BOOST_TEST(captured.find("3 ops") != std::string::npos, captured);
  // CSE merged the two exps: the optimized graph has one.
  BOOST_TEST(optimized.find("exp") == optimized.rfind("exp"), optimized);
  BOOST_TEST(slurp(dir / "dumped_graph_1.captured.dot").find("digraph") == 0u);
  std::filesystem::remove_all(dir);
}
