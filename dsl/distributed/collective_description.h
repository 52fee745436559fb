// A collective as every rank describes it before running it (which collective, dtype, shape, root
// or reduction), so that ranks that disagree fail at once with both descriptions in the error,
// instead of exchanging mismatched buffers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/distributed/process_group.h"

namespace kiln::distributed {

enum class Collective : int64_t { all_reduce = 1, broadcast, all_gather, reduce_scatter, barrier };
std::string_view name(Collective c);

// Tensors of more dims are described by their first kMaxDims sizes (collectives refuse them).
constexpr int kMaxDims = 8;
// Elements of a description: collective, dtype, rank, argument (root or reduction), sizes.
constexpr size_t kDescription = 4 + kMaxDims;

// `t` may be null (barrier).
std::vector<int64_t> describe(Collective c, const Tensor* t, int64_t argument);
// "all_reduce of f32[4, 5] (sum)", from kDescription elements.
std::string describe_text(const int64_t* d);

}  // namespace kiln::distributed
