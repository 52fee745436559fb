// kiln::Error: the one exception type kiln throws for bad input. Its message names the op, the
// shapes or dtypes involved and the rule that was broken, e.g.
//   add: shapes [2, 3] and [4] do not broadcast (dim -1: 3 vs 4)
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from streamable parts: throw_error("reshape: ", shape, " has ", n, " elements").
template <typename... Parts>
[[noreturn]] void throw_error(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

#define KILN_CHECK(cond, ...)                    \
  do {                                           \
    if (!(cond)) ::kiln::throw_error(__VA_ARGS__); \
  } while (0)

}  // namespace kiln
