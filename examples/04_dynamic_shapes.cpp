// Dynamic shapes: a static compile, one recompile when the batch size changes (the batch dim
// becomes symbolic), then no recompiles for new batch sizes. KILN_LOGS=recompiles,guards shows
// the same from the inside.
#include "examples/dynamic_shapes_demo.h"

int main() {
  kiln::manual_seed(0);
  kiln::set_logs("recompiles");
  kiln::examples::DynamicShapesModel model;
  kiln::CompileStats s = kiln::examples::run_dynamic_shapes_demo(model);
  // 8 (static), 16 (recompile: dynamic batch), 1 (size 1 is specialized): three graphs.
  return s.compiles == 3 && s.recompiles == 2 ? 0 : 1;
}
