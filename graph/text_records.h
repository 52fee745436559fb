// Line-based text records, as graph_file.h and schedules/plan_file.h write them: one record per
// line, fields separated by spaces, strings quoted as JSON strings ("a \"b\"\n"), integer lists
// without spaces ("[1,-2,3]"). A record that does not parse gives kiln::Error naming the reader
// and the line.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

std::string record_list(const std::vector<int64_t>& xs);  // "[1,-2,3]"
std::string record_list(const std::vector<int>& xs);

class TextRecord {
 public:
  // `reader` names the caller in errors: "read_graph: line 4: ...".
  TextRecord(std::string_view line, int number, std::string_view reader);

  [[noreturn]] void fail(const std::string& what) const;
  void check(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }
  size_t size() const { return fields_.size(); }
  void expect(size_t n) const;
  const std::string& str(size_t k) const;
  int64_t integer(size_t k) const { return integer_of(str(k)); }
  int64_t integer_of(const std::string& s) const;
  double real(size_t k) const;  // decimal or hexadecimal (%a), inf, nan
  std::vector<std::string> items(size_t k) const;  // "[a,b]" -> {"a", "b"}
  std::vector<int64_t> integers(size_t k) const;
  int id(size_t k, size_t limit) const;                // in [0, limit)
  std::vector<int> ids(size_t k, size_t limit) const;  // each in [0, limit)

 private:
  int number_;
  std::string reader_;
  std::vector<std::string> fields_;
};

}  // namespace kiln
