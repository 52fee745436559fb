// Recording the tape: the autograd hook of dispatch (dsl/dispatch.h). Installed the first time a
// tensor asks for gradients; from then on every op whose inputs take part in autograd leaves a
// Node behind its floating-point outputs (while grad mode is on).
#pragma once

namespace kiln {

void install_autograd();

}  // namespace kiln
