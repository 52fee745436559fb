// A CPU region's own schedule (schedules/region_schedule.h, schedules/cpu_tuning.h): a file named
// after the region's key in KILN_SCHEDULE_DIR sets its task size, parallelism, vector width,
// reduction partials and tiles. Every directive at its default gives kiln's schedule exactly; other
// values change the schedule (its source, as KILN_DEBUG_DIR dumps it) and not the results; a CUDA
// directive on a CPU region is an error naming the file and the directive.
#include <filesystem>
#include <fstream>

#include "schedules/region_schedule.h"
#include "schedules/schedule_source.h"
#include "support/reference.h"
#include "support/schedule_dump.h"
#include "support/scoped_env.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

// "region schedule key 0123456789abcdef" in a dumped schedule.
std::string key_of(const std::string& schedule) {
  std::string marker = "region schedule key ";
  size_t at = schedule.find(marker);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  return schedule.substr(at + marker.size(), 16);
}

// The schedule source without its first line (the comment naming the region and the file), with
// Halide's process-unique names numbered in order.
std::string body(const std::string& schedule) {
  return canonical_schedule_source(schedule.substr(schedule.find('\n') + 1));
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

BOOST_AUTO_TEST_CASE(a_cpu_regions_schedule_file_sets_its_tunables) {
  manual_seed(3);
  Tensor x = randn({512, 1000});
  Tensor want = softmax_rows(x);
  TempDir dump("kiln-test-schedule-dump"), files("kiln-test-schedules");
  Compiled plain = compile_and_dump(x, dump);
  check_close(plain.out, host_values(want), want.shape(), "default schedule");
  std::string key = key_of(plain.schedule);
  BOOST_TEST(plain.schedule.find("its schedule file applied") == std::string::npos);
  ScopedEnv dir("KILN_SCHEDULE_DIR", files.path.c_str());

  // Every directive at its default: kiln's schedule, line for line.
  std::string defaults;
  CpuTuning d;
  for (const CpuTunable& t : cpu_tunables()) defaults += std::string(t.directive) + " " + std::to_string(t.get(d)) + "\n";
  write(files.path / (key + ".schedule"), defaults);
  Compiled same = compile_and_dump(x, dump);
  BOOST_TEST(same.schedule.find("its schedule file applied") != std::string::npos);
  BOOST_TEST(body(same.schedule) == body(plain.schedule));
  BOOST_TEST(same_bits(same.out, plain.out));

  // Smaller tasks, two vectors of partial sums, vectors twice as wide: another schedule, the same
  // softmax.
  write(files.path / (key + ".schedule"), "# softmax rows\ncpu.task.elements 4096\ncpu.row.partials 2\ncpu.vector.scale 2\n");
  Compiled tuned = compile_and_dump(x, dump);
  BOOST_TEST(body(tuned.schedule) != body(plain.schedule));
  check_close(tuned.out, host_values(want), want.shape(), "tuned schedule");

  // Serial: no parallel loop left.
  BOOST_TEST(plain.schedule.find("parallel") != std::string::npos);
  write(files.path / (key + ".schedule"), "cpu.parallel 0\n");
  Compiled serial = compile_and_dump(x, dump);
  BOOST_TEST(serial.schedule.find("parallel") == std::string::npos, serial.schedule);
  check_close(serial.out, host_values(want), want.shape(), "serial schedule");

  // A CUDA directive on a CPU region.
  write(files.path / (key + ".schedule"), "gpu.row.threads 512\n");
  check_error([&] { compile(softmax_rows, {.backend = "halide"})(x); },
              {key + ".schedule", "'gpu.row.threads' is a directive of the CUDA schedule", "runs on the CPU"});
}

// The CPU directives are listed among the known ones, with their ranges, and checked like the
// CUDA ones.
BOOST_AUTO_TEST_CASE(cpu_directives_are_checked_like_the_others) {
  RegionSchedule s = parse_region_schedule("cpu.task.elements 8192\ncpu.parallel 0\n", "c.schedule");
  CpuTuning t = cpu_tuning_of(s);
  BOOST_TEST(t.task_elements == 8192);
  BOOST_TEST(!t.parallel);
  BOOST_TEST(t.partials == CpuTuning{}.partials);
  check_error([] { parse_region_schedule("cpu.row.partials 64\n", "c.schedule"); },
              {"c.schedule:1", "'cpu.row.partials' must lie in [1, 16], got 64"});
  check_error([] { parse_region_schedule("cpu.tile 64\n", "c.schedule"); },
              {"unknown directive 'cpu.tile'", "cpu.transpose.tile 16..512", "gpu.row.threads 32..1024"});
}
