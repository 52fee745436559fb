// The one main() of every test executable.
#define BOOST_TEST_MODULE kiln
#include <boost/test/unit_test.hpp>
