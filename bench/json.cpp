#include "bench/json.h"

#include <cmath>
#include <cstdio>

#include "dsl/atomic_file.h"
#include "dsl/error.h"

namespace kiln::bench {

Json& Json::set(const std::string& key, Json value) {
  auto& o = std::get<Object>(v_);
  for (auto& [k, v] : o)
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  o.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::push(Json value) {
  std::get<Array>(v_).push_back(std::move(value));
  return *this;
}

namespace {

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  out += '"';
}

}  // namespace

void Json::write(std::string& out, int indent, int depth) const {
  std::string pad(size_t(indent * (depth + 1)), ' '), close(size_t(indent * depth), ' ');
  const char* nl = indent ? "\n" : "";
  if (std::holds_alternative<std::nullptr_t>(v_)) out += "null";
  else if (auto* b = std::get_if<bool>(&v_)) out += *b ? "true" : "false";
  else if (auto* d = std::get_if<double>(&v_)) {
    if (!std::isfinite(*d)) { out += "null"; return; }
    char buf[32];
    if (*d == std::floor(*d) && std::abs(*d) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", *d);
    else std::snprintf(buf, sizeof buf, "%.6g", *d);
    out += buf;
  } else if (auto* s = std::get_if<std::string>(&v_)) write_string(out, *s);
  else if (auto* a = std::get_if<Array>(&v_)) {
    bool flat = true;
    for (const Json& e : *a) flat &= !std::holds_alternative<Array>(e.v_) && !std::holds_alternative<Object>(e.v_);
    out += '[';
    for (size_t i = 0; i < a->size(); ++i) {
      out += i ? (flat ? ", " : ",") : "";
      if (!flat) out += nl + pad;
      (*a)[i].write(out, indent, depth + 1);
    }
    if (!flat && !a->empty()) out += nl + close;
    out += ']';
  } else if (auto* o = std::get_if<Object>(&v_)) {
    out += '{';
    for (size_t i = 0; i < o->size(); ++i) {
      out += (i ? "," : "");
      out += nl + pad;
      write_string(out, (*o)[i].first);
      out += indent ? ": " : ":";
      (*o)[i].second.write(out, indent, depth + 1);
    }
    if (!o->empty()) out += nl + close;
    out += '}';
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out + "\n";
}

void write_file_atomic(const std::string& path, const std::string& text) {
  kiln::write_file_atomic("write", path, {{text.data(), text.size()}});
}

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : t_(text), where_(where) {}

  Json document() {
    Json v = value();
    space();
    if (i_ != t_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw_error("JSON ", where_, ": ", what, " at byte ", i_);
  }
  void space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) ++i_;
  }
  bool take(char c) {
    space();
    if (i_ < t_.size() && t_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (t_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= t_.size()) break;
      char e = t_[i_++];
      if (e == 'n') out += '\n';
      else if (e == 't') out += '\t';
      else if (e == 'r') out += '\r';
      else if (e == 'u') {
        if (i_ + 4 > t_.size()) fail("a cut \\u escape");
        unsigned code = unsigned(std::stoul(t_.substr(i_, 4), nullptr, 16));
        i_ += 4;
        if (code < 0x80) out += char(code);
        else if (code < 0x800) out += char(0xc0 | (code >> 6)), out += char(0x80 | (code & 0x3f));
        else out += char(0xe0 | (code >> 12)), out += char(0x80 | ((code >> 6) & 0x3f)), out += char(0x80 | (code & 0x3f));
      } else out += e;  // \" \\ \/
    }
    if (i_ >= t_.size()) fail("an unterminated string");
    ++i_;
    return out;
  }
  Json value() {
    space();
    if (i_ >= t_.size()) fail("no value");
    char c = t_[i_];
    if (c == '{') {
      ++i_;
      Json o = Json::object();
      if (take('}')) return o;
      do {
        space();
        std::string key = string();
        expect(':');
        o.set(key, value());
      } while (take(','));
      expect('}');
      return o;
    }
    if (c == '[') {
      ++i_;
      Json a = Json::array();
      if (take(']')) return a;
      do a.push(value());
      while (take(','));
      expect(']');
      return a;
    }
    if (c == '"') return Json(string());
    if (word("true")) return Json(true);
    if (word("false")) return Json(false);
    if (word("null")) return Json();
    size_t used = 0;
    double d = 0;
    try {
      d = std::stod(t_.substr(i_, 64), &used);
    } catch (const std::exception&) {
      fail("not a value");
    }
    i_ += used;
    return Json(d);
  }

  const std::string& t_;
  std::string where_;
  size_t i_ = 0;
};

const Json& null_json() {
  static const Json null;
  return null;
}

}  // namespace

Json Json::parse(const std::string& text, const std::string& where) { return Parser(text, where).document(); }

bool Json::has(const std::string& key) const {
  if (auto* o = std::get_if<Object>(&v_))
    for (const auto& [k, v] : *o)
      if (k == key) return true;
  return false;
}

const Json& Json::operator[](const std::string& key) const {
  auto* o = std::get_if<Object>(&v_);
  KILN_CHECK(o, "JSON: '", key, "' asked of a value that is not an object");
  for (const auto& [k, v] : *o)
    if (k == key) return v;
  return null_json();
}

const Json& Json::operator[](size_t i) const {
  auto* a = std::get_if<Array>(&v_);
  KILN_CHECK(a && i < a->size(), "JSON: element ", i, " asked of a value that is not an array that long");
  return (*a)[i];
}

size_t Json::size() const {
  if (auto* a = std::get_if<Array>(&v_)) return a->size();
  if (auto* o = std::get_if<Object>(&v_)) return o->size();
  throw_error("JSON: size asked of a value that is neither an array nor an object");
}

double Json::number() const {
  auto* d = std::get_if<double>(&v_);
  KILN_CHECK(d, "JSON: a number expected");
  return *d;
}

const std::string& Json::str() const {
  auto* s = std::get_if<std::string>(&v_);
  KILN_CHECK(s, "JSON: a string expected");
  return *s;
}

bool Json::boolean() const {
  auto* b = std::get_if<bool>(&v_);
  KILN_CHECK(b, "JSON: true or false expected");
  return *b;
}

}  // namespace kiln::bench
