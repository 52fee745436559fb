// The tuning database (schedules/tuning_db.h): records round-trip and a record cut short is never
// taken for a whole one; compile() applies a region's record and never one of another device,
// kiln version or region; a writer killed mid-write and two writers at once leave only whole
// records; the eager GEMM's choice is measured once, kept, read back and followed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "dsl/eager/matmul.h"
#include "schedules/region_schedule.h"
#include "schedules/region_tuner.h"
#include "schedules/tuning_db.h"
#include "support/reference.h"
#include "support/schedule_dump.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

// Whether the record (cpu.parallel 0) was applied: the log line says so and no loop is parallel.
bool serial_record_applied(const std::string& schedule) {
  bool said = schedule.find("its tuning database record applied") != std::string::npos;
  bool parallel = schedule.find("parallel(") != std::string::npos;
  BOOST_TEST(said == !parallel, schedule);
  return said;
}

// The signature of softmax_rows' one region, as kiln tune records it.
std::string softmax_signature(const Tensor& x) {
  auto f = compile(softmax_rows, {.backend = "halide"});
  RegionRecorder recorder;
  f(x);
  BOOST_TEST_REQUIRE(recorder.regions().size() == 1u);
  return recorder.regions()[0].signature;
}

// std::cerr's text while it lives.
struct CapturedStderr {
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  ~CapturedStderr() { std::cerr.rdbuf(saved); }
};

// A body whose lines all name `round`: a record whose lines disagree, or are fewer, was torn.
std::string round_body(int round, int lines) {
  std::string b;
  for (int i = 0; i < lines; ++i) b += "cpu.task.elements " + std::to_string(4096 + round) + "\n";
  return b;
}

// Every record of `keys` found is whole: `lines` lines naming one round.
void check_whole(const std::vector<std::string>& keys, int lines, bool all_present) {
  for (const std::string& key : keys) {
    std::optional<TuningRecord> r = find_tuning_record("region", key, "test device");
    BOOST_TEST((r.has_value() || !all_present), key);
    if (!r) continue;
    std::istringstream in(r->body);
    std::string line, first;
    int n = 0;
    while (std::getline(in, line)) {
      if (first.empty()) first = line;
      BOOST_TEST(line == first);
      ++n;
    }
    BOOST_TEST(n == lines);
  }
}

// Writes records of `keys` over and over (a tuner), each round's bodies naming the round.
[[noreturn]] void write_rounds(const std::vector<std::string>& keys, int lines, int rounds, int offset) {
  for (int round = 0; round < rounds; ++round)
    for (const std::string& key : keys) write_tuning_record("region", key, "test device", round_body(round + offset, lines));
  _exit(0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_record_round_trips_and_a_cut_one_never_passes_for_it) {
  TuningRecord r{.kind = "region", .key = "inputs %0:f32[4, 8]\nexp(...) %0 -> %1\noutputs 1", .device = "a CPU (2 threads)",
                 .versions = tuning_versions(), .body = "cpu.vector.scale 2\ncpu.parallel 0\n"};
  std::string text = tuning_record_text(r);
  TuningRecord back = parse_tuning_record(text, "r.record");
  BOOST_TEST(back.kind == r.kind);
  BOOST_TEST(back.key == r.key);
  BOOST_TEST(back.device == r.device);
  BOOST_TEST(back.versions == r.versions);
  BOOST_TEST(back.body == r.body);
  // Every prefix either fails to parse or holds another key (so it is never found for this one).
  for (size_t n = 0; n < text.size(); ++n) {
    try {
      TuningRecord cut = parse_tuning_record(text.substr(0, n), "cut.record");
      BOOST_TEST(cut.key != r.key, "a prefix of " << n << " bytes parsed as the whole record");
    } catch (const Error&) {
    }
  }
  check_error([] { parse_tuning_record("kind region\n", "x.record"); }, {"x.record", "not a kiln tuning record"});
}

BOOST_AUTO_TEST_CASE(compile_applies_a_regions_record_and_no_other) {
  manual_seed(5);
  Tensor x = randn({256, 1000});
  Tensor want = softmax_rows(x);
  TempDir dump("kiln-test-tuning-dump"), db("kiln-test-tuning-db");
  TuningDbScope scope(db.path.string());
  std::string signature = softmax_signature(x);
  std::string device = tuning_device_name(Device::cpu());
  BOOST_TEST(!serial_record_applied(compile_and_dump(x, dump).schedule));

  // Serial: the record applies, the results stay.
  std::string path = write_tuning_record("region", signature, device, "cpu.parallel 0\n");
  BOOST_TEST(fs::exists(path));
  Compiled tuned = compile_and_dump(x, dump);
  BOOST_TEST(tuned.schedule.find("its tuning database record applied: " + path) != std::string::npos, tuned.schedule);
  BOOST_TEST(serial_record_applied(tuned.schedule));
  check_close(tuned.out, host_values(want), want.shape(), "the record's schedule");

  // Another machine's record: not applied.
  fs::remove(path);
  write_tuning_record("region", signature, "another CPU (64 threads)", "cpu.parallel 0\n");
  BOOST_TEST(!serial_record_applied(compile_and_dump(x, dump).schedule));

  // Another region's record in this region's file (a copied file): not applied.
  std::string other = "inputs %0:f32[7]cpu{}[1,]@0\noutputs 0";
  TuningRecord stray{.kind = "region", .key = other, .device = device, .versions = tuning_versions(), .body = "cpu.parallel 0\n"};
  std::ofstream(path) << tuning_record_text(stray);
  BOOST_TEST(!serial_record_applied(compile_and_dump(x, dump).schedule));

  // Made by another kiln: not applied, one warning naming the file.
  TuningRecord old{.kind = "region", .key = signature, .device = device, .versions = "kiln-0.0.1-0000000000000000 halide-14.0.0",
                   .body = "cpu.parallel 0\n"};
  std::ofstream(path) << tuning_record_text(old);
  {
    CapturedStderr err;
    BOOST_TEST(!serial_record_applied(compile_and_dump(x, dump).schedule));
    compile_and_dump(x, dump);
    std::string said = err.text.str();
    BOOST_TEST(said.find(path + ": made by another kiln") != std::string::npos, said);
    BOOST_TEST(said.find("made by another kiln") == said.rfind("made by another kiln"), "warned twice: " << said);
  }

  // Malformed: skipped with a warning.
  std::string cut = tuning_record_path("region", "another region", device);
  std::ofstream(cut) << "# kiln tuning record (schedules/tuning_db.h)\nkind region\n";
  {
    CapturedStderr err;
    BOOST_TEST(!find_tuning_record("region", "another region", device));
    BOOST_TEST(err.text.str().find(cut + ": tuning record") != std::string::npos, err.text.str());
  }

  // The database off: nothing found.
  write_tuning_record("region", signature, device, "cpu.parallel 0\n");
  TuningDbScope off(std::nullopt);
  BOOST_TEST(!find_tuning_record("region", signature, device));
  BOOST_TEST(!serial_record_applied(compile_and_dump(x, dump).schedule));
}

BOOST_AUTO_TEST_CASE(a_writer_killed_mid_write_and_two_writers_at_once_leave_whole_records) {
  TempDir db("kiln-test-tuning-writers");
  TuningDbScope scope(db.path.string());
  std::vector<std::string> keys;
  for (int k = 0; k < 8; ++k) keys.push_back("region " + std::to_string(k));
  const int lines = 20000;  // about 480 KB a record: a write takes long enough to be cut

  // A writer killed while it writes, again and again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t child = fork();
    BOOST_TEST_REQUIRE(child >= 0);
    if (child == 0) write_rounds(keys, lines, 1000000, attempt * 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 70 * attempt));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    BOOST_TEST(WIFSIGNALED(status));
    check_whole(keys, lines, false);
  }

  // Two tuners at once, to the end: every record present and whole.
  pid_t a = fork();
  if (a == 0) write_rounds(keys, lines, 20, 100000);
  pid_t b = fork();
  if (b == 0) write_rounds(keys, lines, 20, 200000);
  for (pid_t p : {a, b}) {
    int status = 0;
    ::waitpid(p, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  check_whole(keys, lines, true);
}

BOOST_AUTO_TEST_CASE(the_gemm_choice_follows_the_nearest_measured_size) {
  GemmChoice c = GemmChoice::parse("gemm 64 halide 100.0 eigen 150.0\ngemm 1024 halide 400.0 eigen 300.0\n", "c");
  BOOST_TEST(c.eigen_for(64 * 64 * 64));
  BOOST_TEST(c.eigen_for(100 * 100 * 100));
  BOOST_TEST(!c.eigen_for(1024 * 1024 * 1024));
  BOOST_TEST(!c.eigen_for(int64_t(4096) * 4096 * 4096));
  BOOST_TEST(GemmChoice::parse(c.text(), "c").text() == c.text());
  check_error([] { GemmChoice::parse("gemm 64 halide 100\n", "g.record"); }, {"g.record:1", "expected 'gemm SIZE"});

  // The eager matmul follows an installed choice, and computes the same either way.
  manual_seed(9);
  Tensor a = randn({256, 192}), b = randn({192, 320});
  Shape shape;
  std::vector<double> want = matmul_reference(a, b, &shape);
  Tolerance sums{1e-5, 1e-6 * 192};  // f32 sums of 192 products of order 1
  set_gemm_choice_source([] { return GemmChoice::parse("gemm 256 halide 1.0 eigen 2.0\n", "eigen"); });
  BOOST_TEST(eager_gemm_uses_eigen(256, 192, 320));
  check_close(matmul(a, b), want, shape, sums, "on Eigen");
  set_gemm_choice_source([] { return GemmChoice::parse("gemm 256 halide 2.0 eigen 1.0\n", "halide"); });
  BOOST_TEST(!eager_gemm_uses_eigen(256, 192, 320));
  check_close(matmul(a, b), want, shape, sums, "on Halide");
  BOOST_TEST(eager_gemm_uses_eigen(4, 192, 320));  // a GEMV-like shape: Eigen whatever was measured
  set_gemm_choice_source(machine_gemm_choice_from_db);
}

BOOST_AUTO_TEST_CASE(the_machines_gemm_choice_is_measured_once_and_kept) {
  TempDir db("kiln-test-tuning-gemm");
  TuningDbScope scope(db.path.string());
  std::string path = tuning_record_path("gemm", "f32", tuning_device_name(Device::cpu()));
  BOOST_TEST(!fs::exists(path));
  std::optional<GemmChoice> measured = machine_gemm_choice_from_db();
  BOOST_TEST_REQUIRE(measured.has_value());
  BOOST_TEST(measured->points.size() == 6u);
  for (const GemmPoint& p : measured->points) BOOST_TEST((p.halide_gflops > 0.1 && p.eigen_gflops > 0.1));
  BOOST_TEST_REQUIRE(fs::exists(path));
  // Read back, not measured again: the same numbers.
  std::optional<GemmChoice> again = machine_gemm_choice_from_db();
  BOOST_TEST_REQUIRE(again.has_value());
  BOOST_TEST(again->text() == measured->text());
}
