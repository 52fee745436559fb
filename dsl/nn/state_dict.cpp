#include "dsl/nn/state_dict.h"

#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "dsl/atomic_file.h"
#include "dsl/error.h"

namespace kiln::nn {

namespace {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::bool_: return "BOOL";
  }
  return "?";
}

struct Entry {
  std::string dtype;
  Shape shape;
  int64_t begin = -1, end = -1;
};

// A reader for the header's JSON: an object of objects with string, integer-array and nested
// object values (the "__metadata__" entry is skipped).
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, Entry> parse() {
    std::map<std::string, Entry> out;
    expect('{');
    if (peek() == '}') return ++i_, out;
    do {
      std::string name = string();
      expect(':');
      if (name == "__metadata__") {
        skip_object();
        continue;
      }
      Entry e;
      expect('{');
      do {
        std::string key = string();
        expect(':');
        if (key == "dtype") e.dtype = string();
        else if (key == "shape") e.shape = ints();
        else if (key == "data_offsets") {
          std::vector<int64_t> o = ints();
          if (o.size() != 2) fail("data_offsets of '" + name + "' must have two entries");
          e.begin = o[0];
          e.end = o[1];
        } else fail("unknown key '" + key + "' in entry '" + name + "'");
      } while (comma());
      expect('}');
      out[name] = e;
    } while (comma());
    expect('}');
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw_error("load_safetensors: ", path_, ": malformed safetensors header at byte ", i_, ": ", what);
  }
  char peek() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool comma() {
    if (peek() != ',') return false;
    ++i_;
    return true;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') fail("escapes in names are not supported");
      out += s_[i_++];
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> out;
    expect('[');
    if (peek() == ']') return ++i_, out;
    do {
      peek();
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(s_.substr(i_, 24), &used);
      } catch (const std::exception&) {
        fail("expected an integer");
      }
      if (v < 0) fail("negative integer");
      out.push_back(v);
      i_ += used;
    } while (comma());
    expect(']');
    return out;
  }
  void skip_object() {
    expect('{');
    if (peek() == '}') return void(++i_);
    do {
      string();
      expect(':');
      string();
    } while (comma());
    expect('}');
  }

  const std::string& s_;
  std::string path_;
  size_t i_ = 0;
};

}  // namespace

void save_state_dict(const Module& m, const std::string& path) { save_safetensors(m.named_parameters(), path); }

void save_safetensors(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& path) {
  std::ostringstream header;
  header << "{\"__metadata__\":{\"format\":\"pt\"}";
  std::vector<Tensor> tensors;
  int64_t offset = 0;
  for (const auto& [name, t] : named) {
    KILN_CHECK(name.find('"') == std::string::npos && name.find('\\') == std::string::npos,
               "save_safetensors: tensor name '", name, "' has a quote or backslash");
    Tensor c = t.detach().to(Device::cpu()).contiguous();
    int64_t bytes = c.numel() * int64_t(itemsize(c.dtype()));
    header << ",\"" << name << "\":{\"dtype\":\"" << safetensors_dtype(c.dtype()) << "\",\"shape\":[";
    for (size_t i = 0; i < c.shape().size(); ++i) header << (i ? "," : "") << c.shape()[i];
    header << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
    offset += bytes;
    tensors.push_back(c);
  }
  header << "}";
  std::string h = header.str();
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  std::vector<std::pair<const void*, size_t>> parts{{len, 8}, {h.data(), h.size()}};
  for (const Tensor& c : tensors) parts.emplace_back(c.data_ptr(), size_t(c.numel()) * itemsize(c.dtype()));
  write_file_atomic("save_state_dict", path, parts);
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path) {
  std::optional<std::string> file = read_file(path);
  KILN_CHECK(file.has_value(), "load_safetensors: cannot open ", path);
  const std::string& bytes = *file;
  KILN_CHECK(bytes.size() >= 8, "load_safetensors: ", path, " is too short for a safetensors file (", bytes.size(),
             " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[size_t(i)])) << (8 * i);
  KILN_CHECK(n <= bytes.size() - 8, "load_safetensors: ", path, ": header length ", n,
             " runs past the end of the file (", bytes.size(), " bytes)");
  std::string header = bytes.substr(8, size_t(n));
  std::map<std::string, Entry> entries = HeaderParser(header, path).parse();
  const uint64_t data_size = bytes.size() - 8 - n;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, e] : entries) {
    std::optional<DType> dtype;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_})
      if (e.dtype == safetensors_dtype(t)) dtype = t;
    KILN_CHECK(dtype, "load_safetensors: ", path, ": '", name, "' has dtype ", e.dtype,
               ", which kiln has no type for (F32 F64 F16 BF16 I32 I64 BOOL)");
    int64_t want = numel(e.shape) * int64_t(itemsize(*dtype));
    KILN_CHECK(e.begin >= 0 && e.end - e.begin == want && uint64_t(e.end) <= data_size, "load_safetensors: ", path,
               ": data_offsets [", e.begin, ", ", e.end, ") of '", name, "' do not hold ", want,
               " bytes inside the ", data_size, "-byte data section");
    Tensor v = Tensor::empty(e.shape, {*dtype, Device::cpu()});
    std::memcpy(v.data_ptr(), bytes.data() + 8 + n + e.begin, size_t(want));
    out.emplace_back(name, v);
  }
  return out;
}

void load_state_dict(Module& m, const std::string& path) {
  std::map<std::string, Tensor> loaded;
  for (auto& [name, t] : load_safetensors(path)) loaded[name] = t;
  std::vector<std::pair<Tensor, Tensor>> updates;  // (parameter, loaded value): applied only if all check out
  for (const auto& [name, t] : m.named_parameters()) {
    auto it = loaded.find(name);
    KILN_CHECK(it != loaded.end(), "load_state_dict: ", path, " has no tensor '", name, "'");
    const Tensor& v = it->second;
    KILN_CHECK(v.dtype() == t.dtype(), "load_state_dict: ", path, ": '", name, "' has dtype ",
               safetensors_dtype(v.dtype()), ", the parameter ", t.dtype());
    KILN_CHECK(v.shape() == t.shape(), "load_state_dict: ", path, ": '", name, "' has shape ", to_string(v.shape()),
               ", the parameter ", to_string(t.shape()));
    updates.emplace_back(t, v.to(t.device()));
  }
  for (auto& [param, value] : updates) param.detach().copy_(value);
}

}  // namespace kiln::nn
