#include "bench/crash_stack.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <initializer_list>

namespace kiln::bench {

namespace {

void on_crash(int sig) {
  const char header[] = "kiln: fatal signal; stack:\n";
  (void)!::write(STDERR_FILENO, header, sizeof header - 1);
  void* frames[64];
  ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void print_stack_on_crash() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, on_crash);
}

}  // namespace kiln::bench
