// The eager kernels' fingerprints (generators/kernel_fingerprint.h, kernel_stamps.h), which decide what the build
// regenerates: equal for the same pipeline built again, different for any change to a constant's
// bits, a schedule directive, a specialization or an input's constraint; and the build step
// rewrites a kernel's stamp only when its fingerprint changed.
#include <Halide.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "generators/kernel_fingerprint.h"
#include "generators/kernel_stamps.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
using namespace Halide;

namespace {

// A pipeline with explicit names throughout (Halide numbers unnamed ones per process), varied by
// one knob at a time.
struct Knobs {
  float scale = 0.1f;
  int vector = 8;
  bool specialize = false;
  bool dense_input = false;
  int wrapper_unroll = 0;  // > 0: the input read through a wrapper (in.in(f)) computed per chunk, unrolled by this
};

Pipeline build(const Knobs& k) {
  ImageParam in(Float(32), 1, "in");
  if (!k.dense_input) in.dim(0).set_stride(Expr());
  Var x("x"), xi("xi");
  Func f("f");
  f(x) = in(x) * k.scale;
  f.vectorize(x, k.vector);
  if (k.wrapper_unroll > 0) {
    Var xo("xo");
    f.split(x, xo, xi, 16);
    in.in(f).compute_at(f, xo).unroll(in.in(f).args()[0], k.wrapper_unroll);
  }
  if (k.specialize) f.specialize(in.dim(0).extent() > 64).parallel(x);
  return Pipeline(f);
}

// The fingerprint of build(k), described in a forked process as the build step does (a second
// Func "f" in one process would be named f$1).
std::string fingerprint(const Knobs& k) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string text = pipeline_fingerprint(build(k));
    for (size_t done = 0; done < text.size();) {
      ssize_t n = ::write(fds[1], text.data() + done, text.size() - done);
      if (n <= 0) ::_exit(1);
      done += size_t(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof chunk)) > 0;) text.append(chunk, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return text;
}

// A generator for the build step's test: its scale comes from a parameter.
class ScaledCopy : public Generator<ScaledCopy> {
 public:
  GeneratorParam<float> scale{"scale", 1.0f};
  Input<Buffer<float>> in{"in", 1};
  Output<Buffer<float>> out{"out", 1};
  void generate() {
    Var x("x");
    out(x) = in(x) * scale;
  }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(ScaledCopy, kiln_test_scaled_copy)

BOOST_AUTO_TEST_CASE(the_same_pipeline_has_the_same_fingerprint) {
  const std::string first = fingerprint({});
  BOOST_TEST(first.find("func f(x,)") != std::string::npos);
  BOOST_TEST(first == fingerprint({}));
}

BOOST_AUTO_TEST_CASE(any_change_that_can_change_the_code_changes_the_fingerprint) {
  const std::string base = fingerprint({});
  Knobs next_float;
  next_float.scale = std::nextafter(0.1f, 1.0f);  // the IR printer would round both to 0.100000
  Knobs narrower;
  narrower.vector = 4;
  Knobs specialized;
  specialized.specialize = true;
  Knobs dense;
  dense.dense_input = true;
  // A wrapper's schedule: Halide substitutes wrappers only when lowering, so no definition calls
  // them (the embedding backward's staged loads once changed and regenerated nothing).
  Knobs wrapped, wrapped_wider;
  wrapped.wrapper_unroll = 2;
  wrapped_wider.wrapper_unroll = 4;
  for (const Knobs& k : {next_float, narrower, specialized, dense, wrapped}) BOOST_TEST(fingerprint(k) != base);
  BOOST_TEST(fingerprint(wrapped_wider) != fingerprint(wrapped));
}

BOOST_AUTO_TEST_CASE(the_build_step_rewrites_only_the_stamps_that_changed) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln-fingerprint-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write_list = [&](const std::string& second_scale) {
    std::ofstream list(dir / "test.kernels");
    list << "k_one kiln_test_scaled_copy host scale=2\n";
    list << "k_two kiln_test_scaled_copy host scale=" << second_scale << "\n";
  };
  write_list("3");
  BOOST_TEST(update_kernel_stamps((dir / "test.kernels").string(), dir.string()) == 0);
  const std::string one = file_bytes((dir / "k_one.stamp").string()), two = file_bytes((dir / "k_two.stamp").string());
  BOOST_TEST(!one.empty());
  BOOST_TEST(one != two);
  const auto one_time = fs::last_write_time(dir / "k_one.stamp");

  write_list("4");
  BOOST_TEST(update_kernel_stamps((dir / "test.kernels").string(), dir.string()) == 0);
  BOOST_TEST(file_bytes((dir / "k_one.stamp").string()) == one);
  BOOST_TEST((fs::last_write_time(dir / "k_one.stamp") == one_time));  // untouched: not regenerated
  BOOST_TEST(file_bytes((dir / "k_two.stamp").string()) != two);
  BOOST_TEST(!fs::exists(dir / "k_two.stamp.new"));

  // A generator that fails fails the step, naming the kernel.
  {
    std::ofstream list(dir / "bad.kernels");
    list << "k_bad no_such_generator host\n";
  }
  BOOST_TEST(update_kernel_stamps((dir / "bad.kernels").string(), dir.string()) != 0);
  fs::remove_all(dir);
}
