#include "aot/generator.h"

#include <iostream>
#include <string>

#include "aot/export.h"
#include "aot/model_sources.h"
#include "dsl/error.h"
#include "schedules/tuning_db.h"

namespace kiln::aot {

namespace {

const char* kUsage =
    "usage: GENERATOR --name NAME --out DIR [--dynamic input:dim:min..max ...] [--specialize \"x.1 % 64 == 0\" ...] "
    "[--target host|HALIDE_TARGET ...]";

ExportOptions parse_arguments(int argc, char** argv) {
  ExportOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    KILN_CHECK(i + 1 < argc, "'", a, "' needs a value (", kUsage, ")");
    std::string value = argv[++i];
    if (a == "--name") o.name = value;
    else if (a == "--out") o.dir = value;
    else if (a == "--dynamic") o.dynamic.push_back(parse_dynamic_dim(value));
    else if (a == "--specialize") o.specialize.push_back(parse_specialization(value));
    else if (a == "--target") o.targets.push_back(value);
    else throw_error("unknown argument '", a, "' (", kUsage, ")");
  }
  KILN_CHECK(!o.name.empty() && !o.dir.empty(), "--name and --out are required (", kUsage, ")");
  return o;
}

}  // namespace

int generator_main(const std::function<Program()>& entry, int argc, char** argv) {
  std::string name = "?";
  try {
    ExportOptions options = parse_arguments(argc, argv);
    name = options.name;
    // A build's output depends on its sources and KILN_SCHEDULE_DIR alone, never on this machine's
    // tuning database; nor does a build, cores busy with other jobs, measure the machine's GEMM.
    TuningDbScope no_database(std::nullopt);
    std::cout << "kiln_add_model(" << name << "): tracing and compiling ahead of time" << std::endl;
    ExportedModel m = export_program(entry(), options);
    write_model_sources(m, options.dir);
    std::cout << "kiln_add_model(" << name << "): " << m.summary << std::endl;
    for (const std::string& s : m.specialized) std::cout << "kiln_add_model(" << name << "):   " << s << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kiln_add_model(" << name << "): error: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace kiln::aot
