#include "graph/text_records.h"

#include <cstdlib>
#include <sstream>

#include "dsl/error.h"

namespace kiln {

std::string record_list(const std::vector<int64_t>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? "," : "") + std::to_string(xs[i]);
  return out + "]";
}

std::string record_list(const std::vector<int>& xs) { return record_list(std::vector<int64_t>(xs.begin(), xs.end())); }

TextRecord::TextRecord(std::string_view line, int number, std::string_view reader) : number_(number), reader_(reader) {
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
    } else if (line[i] == '"') {
      std::string s;
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\') {
          s += line[i];
          continue;
        }
        check(++i < line.size(), "a string ends in '\\'");
        char c = line[i];
        if (c == 'n') {
          s += '\n';
        } else if (c == 't') {
          s += '\t';
        } else if (c == 'u') {
          check(i + 4 < line.size(), "a short \\u escape");
          s += char(std::strtol(std::string(line.substr(i + 1, 4)).c_str(), nullptr, 16));
          i += 4;
        } else {
          s += c;
        }
      }
      check(i < line.size(), "a string without its closing quote");
      ++i;
      fields_.push_back(std::move(s));
    } else {
      size_t end = line.find(' ', i);
      if (end == std::string_view::npos) end = line.size();
      fields_.emplace_back(line.substr(i, end - i));
      i = end;
    }
  }
}

void TextRecord::fail(const std::string& what) const { throw_error(reader_, ": line ", number_, ": ", what); }

void TextRecord::expect(size_t n) const {
  check(fields_.size() == n, "expected " + std::to_string(n) + " fields, got " + std::to_string(fields_.size()));
}

const std::string& TextRecord::str(size_t k) const {
  check(k < fields_.size(), "field " + std::to_string(k) + " is missing");
  return fields_[k];
}

int64_t TextRecord::integer_of(const std::string& s) const {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  check(end && *end == 0 && !s.empty(), "'" + s + "' is not an integer");
  return int64_t(v);
}

double TextRecord::real(size_t k) const {
  const std::string& s = str(k);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  check(end && *end == 0 && !s.empty(), "'" + s + "' is not a number");
  return v;
}

std::vector<std::string> TextRecord::items(size_t k) const {
  const std::string& s = str(k);
  check(s.size() >= 2 && s.front() == '[' && s.back() == ']', "'" + s + "' is not a list");
  std::vector<std::string> out;
  std::stringstream ss(s.substr(1, s.size() - 2));
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::vector<int64_t> TextRecord::integers(size_t k) const {
  std::vector<int64_t> out;
  for (const std::string& item : items(k)) out.push_back(integer_of(item));
  return out;
}

namespace {

// The id v, checked to be in [0, limit) by `record`.
int checked_id(const TextRecord& record, int64_t v, size_t limit) {
  record.check(v >= 0 && size_t(v) < limit, "id " + std::to_string(v) + " out of range");
  return int(v);
}

}  // namespace

int TextRecord::id(size_t k, size_t limit) const { return checked_id(*this, integer(k), limit); }

std::vector<int> TextRecord::ids(size_t k, size_t limit) const {
  std::vector<int> out;
  for (int64_t v : integers(k)) out.push_back(checked_id(*this, v, limit));
  return out;
}

}  // namespace kiln
