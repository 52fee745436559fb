// set_flush_denormal (dsl/flush_denormal.h): with it a product below the smallest normal float is
// 0, on the host and in kiln's kernels; without it the denormal survives.
#include <cfloat>

#include "kiln.h"
#include "support/reference.h"

using namespace kiln;

namespace {

// 1e-30 * 1e-10 = 1e-40: a denormal float (the smallest normal is about 1.18e-38).
float host_product() {
  volatile float a = 1e-30f, b = 1e-10f;
  return a * b;
}

float kernel_product() {
  Tensor a = full({1}, 1e-30, {.dtype = DType::f32}), b = full({1}, 1e-10, {.dtype = DType::f32});
  return static_cast<const float*>(mul(a, b).contiguous().data_ptr())[0];
}

}  // namespace

BOOST_AUTO_TEST_CASE(denormals_flush_to_zero_only_while_asked) {
  BOOST_TEST(host_product() > 0.0f);
  BOOST_TEST(host_product() < FLT_MIN);
  BOOST_TEST(kernel_product() > 0.0f);
  BOOST_TEST_REQUIRE(set_flush_denormal(true));
  BOOST_TEST(host_product() == 0.0f);
  BOOST_TEST(kernel_product() == 0.0f);
  BOOST_TEST(set_flush_denormal(false));
  BOOST_TEST(host_product() > 0.0f);
  BOOST_TEST(kernel_product() > 0.0f);
}
