// When a CPU loop runs in parallel, for the eager kernels' generators and the compiled regions'
// schedules alike: a task of Halide's thread pool costs microseconds, so a loop goes parallel only
// over kParallelMinElements elements or more, in tasks of about kElementsPerTask elements, and
// small tensors never wake the pool (a one-element op stays around a microsecond).
#pragma once
#include <cstdint>

namespace kiln {

inline constexpr int32_t kParallelMinElements = 1 << 15;
inline constexpr int32_t kElementsPerTask = 1 << 16;

}  // namespace kiln
