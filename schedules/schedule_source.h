// A pipeline's schedule printed as Halide C++ schedule source, read back from the Funcs' schedule
// data (compute and store levels, splits, loop order, parallel/vectorized/unrolled loops,
// atomics; an rfactor shows as its intermediate Func, "max$1_intm"):
// what kiln's scheduler or an autoscheduler actually applied, for KILN_LOGS=schedule and
// the debug dump. Inlined Funcs print nothing. Names are Halide's ("softmax$1", "v22").
//
//   softmax$1.compute_root()
//       .split(d1, to, t, 64, TailStrategy::GuardWithIf)
//       .reorder(d0, t, to)
//       .vectorize(v3)
//       .parallel(to);
#pragma once
#include <Halide.h>

#include <string>
#include <vector>

namespace kiln {

std::string schedule_source(const std::vector<Halide::Func>& outputs);

// The source without the suffixes Halide makes names unique with in a process ("max$2" -> "max"),
// and kiln's generated vars numbered by first appearance ("v31" -> "v#0"): two builds of the same
// schedule compare equal.
std::string canonical_schedule_source(const std::string& source);

}  // namespace kiln
