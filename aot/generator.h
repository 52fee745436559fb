// The main() of a model's generator program, which kiln_add_model builds from the user's
// sources and runs at build time:
//   <name>_generator --name tiny_mlp --out DIR [--dynamic x:0:2..512 ...] [--specialize "x.0 % 8 == 0" ...]
// It calls the entry (a function returning a Program), exports it (export.h) and writes the
// library's sources (model_sources.h). An error (a graph break with its source line, a bad
// DYNAMIC declaration) is printed as "kiln_add_model(tiny_mlp): error: ..." and fails the build.
#pragma once
#include <functional>

#include "aot/program.h"

namespace kiln::aot {

int generator_main(const std::function<Program()>& entry, int argc, char** argv);

}  // namespace kiln::aot
