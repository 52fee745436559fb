// Kinds of op are properties of their OpDef, not lists of names: the registry's properties hold
// for the ops they describe, and graph/ and schedules/ decide by them. This test reads those
// folders' sources and fails on an eager kernel family steering the compiled path, or on a set of
// op names standing for a property (`name == "a" || name == "b"`, `{"eq", "ne", ...}`). A
// pattern that matches one specific op (transpose_matmul's matmul) is fine.
#include <filesystem>
#include <regex>
#include <set>

#include "dsl/op_def.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::set<std::string> ops_where(bool (*has)(const OpDef&)) {
  std::set<std::string> names;
  for (const OpDef* d : all_op_defs())
    if (has(*d)) names.insert(d->name);
  return names;
}

std::vector<std::filesystem::path> compiled_path_sources() {
  std::filesystem::path root = std::filesystem::path(__FILE__).parent_path() / "../..";
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"graph", "schedules"})
    for (const auto& e : std::filesystem::directory_iterator(root / dir))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  return files;
}

}  // namespace

BOOST_AUTO_TEST_CASE(properties_describe_the_ops_they_name) {
  using S = std::set<std::string>;
  BOOST_TEST((ops_where([](const OpDef& d) { return d.comparison; }) == S{"eq", "ne", "lt", "le", "gt", "ge", "isfinite"}));
  BOOST_TEST((ops_where([](const OpDef& d) { return d.compares_with_own_reduction; }) == S{"argmax"}));
  BOOST_TEST((ops_where([](const OpDef& d) { return d.host_checked; }) ==
              S{"embedding", "embedding_backward", "cross_entropy", "cross_entropy_backward"}));
  BOOST_TEST((ops_where([](const OpDef& d) { return d.condition_input >= 0; }) == S{"where"}));
  BOOST_TEST((ops_where([](const OpDef& d) { return d.view.reshape; }) ==
              S{"view", "flatten", "unflatten", "squeeze", "unsqueeze"}));
  BOOST_TEST((ops_where([](const OpDef& d) { return d.random; }) == S{"rand", "randn", "randint", "rand_like"}));
  for (const OpDef* d : all_op_defs()) {
    BOOST_TEST_CONTEXT(d->name) {
      if (d->gemm) BOOST_TEST((d->schedule_class == ScheduleClass::matmul && bool(d->define)));
      if (d->comparison) BOOST_TEST((bool(d->pointwise) && !d->differentiable));
      if (d->schedule_class == ScheduleClass::view) BOOST_TEST((bool(d->view.layout) && bool(d->view.index)));
      // Creation ops that draw no random numbers have one Halide definition, used by compiled
      // regions (random ones run eagerly: the same generator as eager mode).
      if (d->schedule_class == ScheduleClass::creation) BOOST_TEST(bool(d->define) == !d->random);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_compiled_path_decides_by_properties_not_names) {
  std::set<std::string> op_names;
  for (const OpDef* d : all_op_defs()) op_names.insert(d->name);
  // name == "a" || name == "b" (also !=, &&, across lines), and brace lists of two or more op names.
  const std::regex name_chain(R"re((\w+(->|\.))?name\s*[!=]=\s*"[a-z_0-9]+"\s*(\|\||&&)\s*(\w+(->|\.))?\w*\s*[!=]=\s*")re");
  const std::regex name_list(R"re(\{\s*"([a-z_0-9]+)"\s*,\s*"([a-z_0-9]+)")re");
  auto files = compiled_path_sources();
  BOOST_TEST(files.size() > 20u);
  for (const auto& file : files) {
    // Code only: comments may show examples with op names.
    std::string text = std::regex_replace(file_bytes(file.string()), std::regex("//[^\n]*"), "");
    BOOST_TEST_CONTEXT(file.filename().string()) {
      BOOST_TEST(text.find("KernelFamily") == std::string::npos,
                 "an eager kernel family decides something in the compiled path; use an OpDef property");
      BOOST_TEST(!std::regex_search(text, name_chain), "a chain of op-name comparisons stands for a property");
      for (std::sregex_iterator it(text.begin(), text.end(), name_list), end; it != end; ++it)
        BOOST_TEST(!(op_names.count((*it)[1]) && op_names.count((*it)[2])),
                   "a list of op names (" << (*it)[0] << "...) stands for a property");
    }
  }
}
