// The build's fingerprint step (generators/CMakeLists.txt): each kernel's stamp file holds its
// fingerprint (kernel_fingerprint.h) and is rewritten only when that changes, so the kernel's
// generator command, which depends on the stamp, runs only then.
#pragma once
#include <string>

namespace kiln {

// The fingerprint step of the build: `GENERATOR_PROGRAM --kiln-fingerprints LIST STAMP_DIR`.
// LIST has one kernel a line: `name generator target1,target2 param=value ...`. For each kernel
// it builds the pipeline for each target (in a forked process) and rewrites STAMP_DIR/name.stamp
// only when the fingerprint differs, printing why; the kernel's generator command depends on
// that file. Returns the process exit code.
int update_kernel_stamps(const std::string& list_file, const std::string& stamp_dir);

}  // namespace kiln
