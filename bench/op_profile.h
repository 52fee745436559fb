// A dispatch mode that counts and times every op call by name: what the demo prints as
// "what it did". Nested calls (an op running others inside) are counted under each name. With
// `wait` set (a device synchronize), it runs before and after each call, so that an op's time is
// its device time too (`kiln bench gpu --size real` profiles an eager CUDA step so).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "dsl/dispatch.h"

namespace kiln::bench {

class OpProfile : public DispatchMode {
 public:
  struct Entry {
    int64_t calls = 0;
    double seconds = 0;
  };
  explicit OpProfile(std::function<void()> wait = {}) : wait_(std::move(wait)) {}
  TensorList call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) override;
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void print(double total_seconds, size_t max_rows = SIZE_MAX) const;
  // A table of such entries (by name, the costliest first), as print() and the eager step's
  // backward nodes in `kiln bench gpu --size real` show them; `what` heads the name column.
  static void print(const std::map<std::string, Entry>& entries, double total_seconds, size_t max_rows,
                    const char* what);

 private:
  std::function<void()> wait_;
  std::map<std::string, Entry> entries_;
};

}  // namespace kiln::bench
