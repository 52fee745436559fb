#include "support/schedule_dump.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/logs.h"

namespace kiln::test {

namespace fs = std::filesystem;

Tensor softmax_rows(const Tensor& x) { return softmax(x, -1) * 2.0; }

Compiled compile_and_dump(const Tensor& x, const TempDir& dump) {
  fs::remove_all(dump.path);
  fs::create_directories(dump.path);
  set_debug_dir(dump.path.string());
  auto f = compile(softmax_rows, {.backend = "halide"});
  Tensor out = f(x);
  set_debug_dir("");
  std::string text;
  for (const auto& e : fs::directory_iterator(dump.path))
    if (e.path().string().ends_with(".schedule.cpp")) {
      BOOST_TEST(text.empty(), "one region expected");
      std::ifstream in(e.path());
      std::ostringstream s;
      s << in.rdbuf();
      text = s.str();
    }
  BOOST_TEST_REQUIRE(!text.empty());
  return {out, text};
}

}  // namespace kiln::test
