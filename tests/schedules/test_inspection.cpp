// What the halide backend shows: a schedule read back as Halide C++ source, and the debug dump of
// a compiled function (fusion plan with cut reasons, schedule source, stmt, stmt_html, assembly,
// the plan as text).
#include <filesystem>

#include "schedules/disk_cache.h"
#include "schedules/schedule_source.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_CASE(schedule_source_reads_back_what_was_applied) {
  Halide::Func producer("producer"), helper("helper"), consumer("consumer");
  Halide::Var x("x"), y("y"), xo("xo"), xi("xi");
  helper(x, y) = x + y;  // inlined: prints nothing
  producer(x, y) = helper(x, y) * 2;
  consumer(x, y) = producer(x, y) + producer(x + 1, y);
  producer.compute_at(consumer, y).vectorize(x, 8);
  consumer.compute_root().split(x, xo, xi, 16, Halide::TailStrategy::GuardWithIf).parallel(y).vectorize(xi);
  std::string s = schedule_source({consumer});
  BOOST_TEST_MESSAGE(s);
  BOOST_TEST(s.find("producer.compute_at(consumer, y)") != std::string::npos);
  BOOST_TEST(s.find("consumer.compute_root()") != std::string::npos);
  BOOST_TEST(s.find(".split(x, xo, xi, 16, TailStrategy::GuardWithIf)") != std::string::npos);
  BOOST_TEST(s.find(".parallel(y)") != std::string::npos);
  BOOST_TEST(s.find(".vectorize(xi)") != std::string::npos);
  BOOST_TEST(s.find("helper") == std::string::npos);
  BOOST_TEST(s.find("producer") < s.find("consumer.compute_root()"));  // producers first
}

BOOST_AUTO_TEST_CASE(debug_dump_of_a_compiled_function) {
  std::string dir = (fs::temp_directory_path() / ("kiln-test-dump-" + std::to_string(::getpid()))).string();
  std::string cache = dir + "-cache";
  fs::remove_all(dir);
  fs::remove_all(cache);
  set_debug_dir(dir);
  set_disk_cache_dir(cache);
  Tensor w = random_tensor({16, 32}, f32, 1);
  auto fn = [&](const Tensor& x) { return softmax(matmul(relu(x), w.t()) * 0.5, -1); };
  auto f = compile(fn, {.backend = "halide", .name = "dumped"});
  Tensor x = random_tensor({8, 32}, f32, 2);
  check_close(f(x), host_values(fn(x)), {8, 16}, "dumped function");
  set_debug_dir("");

  std::string fusion = dumped(dir, ".fusion.txt");
  BOOST_TEST(fusion.find("region 0: 1 ops (relu)") != std::string::npos, fusion);
  BOOST_TEST(fusion.find("eager matmul") != std::string::npos, fusion);
  BOOST_TEST(fusion.find("matmul runs as an eager GEMM kernel") != std::string::npos, fusion);
  BOOST_TEST(dumped(dir, ".region_1.schedule.cpp").find(".compute_root()") != std::string::npos);
  BOOST_TEST(dumped(dir, ".region_1.stmt").find("produce") != std::string::npos);
  BOOST_TEST(dumped(dir, ".region_1.stmt.html").find("<head>") != std::string::npos);
  std::string assembly = dumped(dir, ".region_1.s");
  BOOST_TEST((assembly.find("vmovups") != std::string::npos || assembly.find("movups") != std::string::npos),
             "vector loads or stores in the assembly");
  BOOST_TEST(dumped(dir, ".optimized.txt").find("softmax") != std::string::npos);
  // The plan as text: its graph, then the steps (the views and the matmul eager, two regions).
  std::string plan = dumped(dir, ".plan.txt");
  BOOST_TEST(plan.find("kiln-graph 1") == 0u, plan);
  BOOST_TEST(plan.find("\nkiln-plan 1\n") != std::string::npos, plan);
  BOOST_TEST(plan.find("\nregion kiln_region_0 ") != std::string::npos, plan);
  BOOST_TEST(plan.find("\neager ") != std::string::npos, plan);
  BOOST_TEST(plan.find("\nregion kiln_region_1 ") != std::string::npos, plan);
  fs::remove_all(dir);
  fs::remove_all(cache);
}
