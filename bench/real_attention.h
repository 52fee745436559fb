// `kiln bench gpu --size real --only attention`: the fused attention op alone, forward and
// backward, at GPT-2 small's shape [8, 12, 1024, 64] and a longer one, bf16 and f16, causal and
// not, in TFLOP/s by FlashAttention's count (forward 4 B H Tq Tk D multiply-adds and adds, halved
// when causal; backward 2.5 times the forward). bench/torch/bench_real.py --attention times
// PyTorch's scaled_dot_product_attention on the same shapes; merge_real.py joins the two.
#pragma once
#include "bench/json.h"
#include "kiln.h"

namespace kiln::bench {

// Prints one line per case and returns the "attention" list of the results file.
Json measure_attention(Device d);

}  // namespace kiln::bench
