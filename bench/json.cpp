#include "bench/json.h"

#include <cmath>
#include <cstdio>

#include "dsl/atomic_file.h"

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

}  // namespace kiln::bench
