// Where the indices and class targets of host-checked ops (OpDef::host_checked: embedding,
// cross_entropy) are checked. One rule for the eager runners and the compiled path.
#pragma once
#include "dsl/device.h"
#include "dsl/settings.h"

namespace kiln {

// Whether a host-checked op on `d` reads its indices or targets on the host and checks them
// before its kernel runs: always on the CPU; on CUDA only with KILN_CHECK_INDICES=1, since reading
// them waits for the stream. Otherwise the CUDA kernels clamp them, and a compiled region may
// gather through them (schedules/lowerable.h, clamped_gather).
inline bool indices_checked_on_host(Device d) { return !d.is_cuda() || flag_setting("KILN_CHECK_INDICES", false); }

}  // namespace kiln
