// The files kiln_add_model builds into an AOT model's static library, from an exported model
// (export.h), each written atomically into `dir`:
//   <name>.h              namespace <name>: class Model (kiln::aot::Model over the code below)
//                         with a typed forward(x, ...) named after the inputs (step(...) for a
//                         training step)
//   <name>.cpp            the graph with its plan and the manifest as string constants, and the
//                         table of region functions (extern "C" <name>_g0_region_N_argv)
//   <name>_regions.o      the regions' compiled code (an empty object when there are none)
//   <name>.safetensors    the module's parameters, which Model(path) loads
#pragma once
#include <string>

#include "aot/export.h"

namespace kiln::aot {

void write_model_sources(const ExportedModel& model, const std::string& dir);

}  // namespace kiln::aot
