#include "autograd/grad_mode.h"

namespace kiln {

namespace {
thread_local bool enabled = true;
}  // namespace

bool grad_enabled() { return enabled; }
void set_grad_enabled(bool e) { enabled = e; }

}  // namespace kiln
