// `kiln bench gpu --size real --only precision [--steps N]`: GPT-2 small trained N steps (default
// 200) as one compiled step in f32 (TF32 matmuls), under bf16 autocast, and under f16 autocast
// with a GradScaler, from the same initial weights on the same synthetic stream of batches, and
// an overflow injected into the f16 run halfway (its loss multiplied by 1e30 for one step); bf16
// and f16 also eagerly. The stream is learnable from the first step: Zipf-distributed tokens, each
// followed by a fixed successor three times in four (real_precision.cpp). Reports each run's loss
// curve (every 10th step), the mean of the last 10 losses against f32's, and the f16 runs' skipped
// steps and loss scale.
#pragma once
#include "bench/json.h"
#include "kiln.h"

namespace kiln::bench {

Json compare_precisions(Device d, int steps);

}  // namespace kiln::bench
