// The one random generator: Philox4x32-10, counter based, so element i of a draw depends only on
// (seed, offset + i) and the same numbers can be produced by a kernel later. manual_seed resets it.
#pragma once
#include <array>
#include <cstdint>

namespace kiln {

void manual_seed(uint64_t seed);

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // counters consumed so far
};
PhiloxState& default_generator();

// Four 32-bit random words for one counter value.
std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key);

}  // namespace kiln
