// A one-region program compiled with KILN_DEBUG_DIR set, for the tests of region schedules (files
// and tuning database records): its output and its region's schedule source as dumped.
//
//   Compiled c = compile_and_dump(x, dump);   // c.schedule: "// ...region_0 (kiln schedule; ..."
#pragma once
#include <string>

#include "support/reference.h"

namespace kiln::test {

// Softmax over rows, scaled: one region with a row reduction and a parallel loop.
Tensor softmax_rows(const Tensor& x);

struct Compiled {
  Tensor out;
  std::string schedule;  // the dumped schedule source of its one region
};

// Compiles softmax_rows afresh with KILN_DEBUG_DIR at `dump` (emptied first) and runs it on x.
Compiled compile_and_dump(const Tensor& x, const TempDir& dump);

}  // namespace kiln::test
