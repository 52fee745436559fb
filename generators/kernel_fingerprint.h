// The fingerprint of an eager kernel: a text that changes whenever the code Halide generates for
// the kernel can change, so that the build regenerates a kernel only when its fingerprint changes
// rather than whenever any op definition or generator changes (generators/CMakeLists.txt).
//
// It describes the pipeline as the generator built it, before lowering: every Func's
// definitions (exact constants, the types of calls and variables), its schedule (loop levels,
// splits, loop types, specializations, storage), its wrappers (f.in(g), with their schedules),
// and the parameters and constant buffers it reads
// with their constraints. Lowering is deterministic in these, the target and Halide's version,
// which the kernel's stamp also records. Names Halide makes up (f12, v3) depend on how many were
// made before in the process, so each kernel is described in a process of its own (forked).
#pragma once
#include <Halide.h>

#include <string>

namespace kiln {

std::string pipeline_fingerprint(const Halide::Pipeline& pipeline);

}  // namespace kiln
