// A compiled graph's plan as text, beside its graph (graph_file.h): each step (an eager node, with
// whether its weight is packed, or a region with the name of its compiled function and the ids
// it reads, writes and sizes by), and which outputs are computed in place or over a dying
// intermediate. Read back with the library that holds the functions (a shared library of the
// disk cache, or an ahead-of-time model's table), it runs without compiling or tracing anything.
//
//   std::string text = write_plan(*executor_plan(*compiled));
//   auto again = make_graph_executor(read_plan(text, library));
//
// Records after the graph's text:
//   kiln-plan 1
//   eager 5 0                                     node, packed weight
//   region kiln_region_0 [nodes] [inputs] [outputs] [symbols] [packed] [in_place] [recomputed]
//   in_place 7 [0,2]                              value, the input positions it is computed into
//   over 9 4                                      value, the dying intermediate it takes
//   end
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "schedules/graph_executor.h"

namespace kiln {

// kiln::Error for a JIT-compiled plan (its code lives in process only).
std::string write_plan(const ExecutorPlan& plan);
// kiln::Error naming the line for malformed text; a function `code` lacks is an error too.
ExecutorPlan read_plan(std::string_view text, std::shared_ptr<const CodeLibrary> code);

}  // namespace kiln
