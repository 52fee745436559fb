// A small JSON value for the reports that `kiln ... --json FILE` writes: objects keep insertion
// order, numbers print with enough digits to round-trip.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln::bench {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() : v_(nullptr) {}
  Json(std::nullptr_t) : v_(nullptr) {}
  Json(bool b) : v_(b) {}
  Json(int v) : v_(double(v)) {}
  Json(int64_t v) : v_(double(v)) {}
  Json(double v) : v_(v) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(Array a) : v_(std::move(a)) {}
  Json(Object o) : v_(std::move(o)) {}
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Json& set(const std::string& key, Json value);  // objects
  Json& push(Json value);                         // arrays
  std::string dump(int indent = 2) const;

  // Reading a report back (`kiln tune-report`). parse() raises kiln::Error naming `where` and the
  // byte where the text stops being JSON; the accessors raise it for a value of another kind.
  static Json parse(const std::string& text, const std::string& where);
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool has(const std::string& key) const;   // an object with this key
  const Json& operator[](const std::string& key) const;  // null when absent
  const Json& operator[](size_t i) const;
  size_t size() const;                      // an array's elements or an object's keys
  double number() const;
  const std::string& str() const;
  bool boolean() const;

 private:
  void write(std::string& out, int indent, int depth) const;
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v_;
};

// Writes `text` to `path` atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace kiln::bench
