// A Boost.Test precondition that skips a case, with "skipped: <reason>", where a facility is
// missing: `unavailable` gives the reason, "" when the facility is there (cuda_unavailable_reason,
// cudnn_unavailable_reason, cupti_unavailable_reason, nvrtc_unavailable_reason).
//
//   BOOST_AUTO_TEST_CASE(ptx, *kiln::test::needs(nvrtc_unavailable_reason)) { ... }
#pragma once
#include <boost/test/unit_test.hpp>

#include <string>

namespace kiln::test {

inline boost::unit_test::precondition needs(std::string (*unavailable)()) {
  return boost::unit_test::precondition([unavailable](boost::unit_test::test_unit_id) {
    std::string why = unavailable();
    boost::test_tools::assertion_result r(why.empty());
    if (!r) r.message() << "skipped: " << why;
    return r;
  });
}

}  // namespace kiln::test
