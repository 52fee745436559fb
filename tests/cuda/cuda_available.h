// Test support for tests/cuda/: the precondition that skips a case, with a message, on machines
// without a usable CUDA device.
//
//   BOOST_AUTO_TEST_CASE(ops, *kiln::test::needs_cuda()) { ... }
#pragma once
#include <boost/test/unit_test.hpp>

#include "kiln.h"
#include "support/preconditions.h"

namespace kiln::test {

inline boost::unit_test::precondition needs_cuda() {
  return needs([] {
    std::string why = cuda_unavailable_reason();
    return why.empty() ? why : "no CUDA device (" + why + ")";
  });
}

inline const Device kCuda = Device::cuda(0);

// Copies of xs on kCuda (an undefined tensor, an op's absent operand, stays undefined).
inline TensorList to_cuda(const TensorList& xs) {
  TensorList out;
  for (const Tensor& x : xs) out.push_back(x.defined() ? x.to(kCuda) : Tensor());
  return out;
}

}  // namespace kiln::test
