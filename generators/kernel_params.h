// Generator parameters shared by the eager kernel generators: which op, which dtype, and the
// string attributes that select a kernel variant ("approximate:tanh").
#pragma once
#include <Halide.h>

#include <string>

#include "dsl/attrs.h"
#include "dsl/dtype.h"

namespace kiln {

// Parses "k1:v1;k2:v2" into string attributes.
Attrs parse_kernel_attrs(const std::string& text);

}  // namespace kiln
