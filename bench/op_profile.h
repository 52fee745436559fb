// A dispatch mode that counts and times every op call by name: what the demo prints as
// "what it did". Nested calls (an op running others inside) are counted under each name.
#pragma once
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
  TensorList call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) override;
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void print(double total_seconds) const;

 private:
  std::map<std::string, Entry> entries_;
};

}  // namespace kiln::bench
