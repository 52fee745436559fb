// Compiled plans as text (schedules/plan_file.h): the plan of every graph the halide backend
// compiles for the zoo's models reads back, with its functions taken from the same shared
// library, into an executor whose outputs equal the original's bit for bit on fresh inputs.
// A function the library lacks, a JIT-compiled plan and malformed text give kiln::Error.
#include <cstring>

#include "autograd/grad_mode.h"
#include "bench/zoo.h"
#include "graph/backend.h"
#include "schedules/disk_cache.h"
#include "schedules/plan_file.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Compiles on the halide backend and keeps what it made.
class KeepCompiled final : public Backend {
 public:
  std::string_view name() const override { return "keep_compiled"; }
  bool fuses_ops() const override { return true; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    std::shared_ptr<CompiledGraph> cg = backend("halide").compile(std::move(g), o);
    compiled.push_back(cg);
    return cg;
  }
  static inline std::vector<std::shared_ptr<CompiledGraph>> compiled;
};

void use_keep_compiled() {
  static bool done = [] {
    register_backend(std::make_shared<KeepCompiled>());
    return true;
  }();
  (void)done;
  KeepCompiled::compiled.clear();
}

// Random inputs for a graph: normal floats, and integers in {0, 1} (valid rows of any table).
TensorList random_inputs(const Graph& g) {
  TensorList in;
  for (const GraphInput& gi : g.inputs) {
    const TensorMeta& m = g.values[size_t(gi.value)].meta;
    in.push_back(is_floating(m.dtype) ? randn(m.shape, {.dtype = m.dtype}) : randint(0, 2, m.shape, {.dtype = m.dtype}));
  }
  return in;
}

}  // namespace

BOOST_AUTO_TEST_CASE(zoo_plans_read_back_run_the_same) {
  use_keep_compiled();
  NoGradGuard no_grad;
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::test)) {
    manual_seed(5);
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
    auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); }, {.backend = "keep_compiled"});
    f(m.make_inputs());
  }
  BOOST_TEST_REQUIRE(KeepCompiled::compiled.size() >= zoo::zoo_names(zoo::ZooSize::test).size());
  int regions = 0;
  for (const auto& cg : KeepCompiled::compiled) {
    const ExecutorPlan* plan = executor_plan(*cg);
    BOOST_TEST_REQUIRE(plan != nullptr);
    BOOST_TEST_CONTEXT(plan->graph->text().substr(0, 300)) {
      std::string text = write_plan(*plan);
      ExecutorPlan back = read_plan(text, plan->code);
      BOOST_TEST(write_plan(back) == text);
      BOOST_TEST_REQUIRE(back.steps.size() == plan->steps.size());
      for (size_t i = 0; i < back.steps.size(); ++i) {
        BOOST_TEST(back.steps[i].function == plan->steps[i].function);
        regions += back.steps[i].node < 0;
      }
      std::shared_ptr<CompiledGraph> again = make_graph_executor(std::move(back));
      TensorList in = random_inputs(*plan->graph);
      TensorList want = cg->run(in), got = again->run(in);
      BOOST_TEST_REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k) BOOST_TEST(same_bits(got[k], want[k]), "output " << k);
    }
  }
  BOOST_TEST(regions > 0);
}

BOOST_AUTO_TEST_CASE(plans_that_cannot_be_written_or_read_say_why) {
  use_keep_compiled();
  NoGradGuard no_grad;
  manual_seed(6);
  auto f = compile([](const Tensor& x) { return exp(x) * 2.0 + 1.0; }, {.backend = "keep_compiled"});
  f(randn({4, 8}));
  BOOST_TEST_REQUIRE(KeepCompiled::compiled.size() == 1u);
  const ExecutorPlan& plan = *executor_plan(*KeepCompiled::compiled[0]);
  std::string text = write_plan(plan);
  size_t at = text.find("region kiln_region_0");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  std::string renamed = text;
  renamed.replace(at, 20, "region kiln_region_9");
  check_error([&] { read_plan(renamed, plan.code); }, {"read_plan: line", "kiln_region_9"});
  check_error([&] { read_plan(text, nullptr); }, {"read_plan: line", "no library was given"});
  check_error([&] { read_plan(text.substr(0, at), plan.code); }, {"ends before the plan's 'end'"});
  check_error([&] { read_plan("kiln-graph 1\nend\n", plan.code); }, {"no 'kiln-plan 1' line"});

  // With the disk cache off the regions are JIT-compiled in process: nothing to name in a file.
  set_disk_cache_enabled(false);
  use_keep_compiled();
  auto g = compile([](const Tensor& x) { return exp(x) * 3.0; }, {.backend = "keep_compiled"});
  g(randn({4, 8}));
  set_disk_cache_enabled(true);
  BOOST_TEST_REQUIRE(KeepCompiled::compiled.size() == 1u);
  check_error([&] { write_plan(*executor_plan(*KeepCompiled::compiled[0])); }, {"write_plan", "JIT-compiled"});
}
