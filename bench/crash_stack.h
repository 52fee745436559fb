// On a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), print the stack to stderr as offsets into
// each binary (`addr2line -e build/bin/kiln 0x...` names them, also for a stripped copy of the
// same build, as the GPU bundle carries), then die as the signal would. The kiln command installs
// it always; test programs when KILN_CRASH_STACK=1 (run them with --catch_system_errors=no).
#pragma once

namespace kiln::bench {

void print_stack_on_crash();

}  // namespace kiln::bench
