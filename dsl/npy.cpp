#include "dsl/npy.h"

#include "dsl/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "dsl/error.h"
#include "dsl/functions.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader and writer assume a little-endian host (kiln targets x86-64)");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlign = 64;
constexpr size_t kGrowthDigits = 21;  // NumPy leaves room to grow the first dim in place

std::string descr_of(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::bool_: return "|b1";
    case DType::bf16: break;
  }
  throw_error("save_npy: dtype ", t, " has no NumPy equivalent");
}

std::string python_tuple(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// A file dtype: what kiln loads it as, its size in the file, whether it is big-endian.
struct FileDType {
  DType dtype;
  size_t itemsize;
  bool is_signed;
  bool big_endian;
};

std::optional<FileDType> parse_descr(std::string_view d) {
  bool big = false;
  if (!d.empty() && std::string_view("<>|=").find(d[0]) != std::string_view::npos) {
    big = d[0] == '>';
    d.remove_prefix(1);
  }
  struct Known { std::string_view code; DType dtype; size_t size; bool is_signed; };
  static constexpr Known known[] = {
      {"f4", DType::f32, 4, true},  {"f8", DType::f64, 8, true},    {"f2", DType::f16, 2, true},
      {"i4", DType::i32, 4, true},  {"i8", DType::i64, 8, true},    {"b1", DType::bool_, 1, false},
      {"i1", DType::i32, 1, true},  {"u1", DType::i32, 1, false},   {"i2", DType::i32, 2, true},
      {"u2", DType::i32, 2, false}, {"u4", DType::i64, 4, false},
  };
  for (const Known& k : known)
    if (d == k.code) return FileDType{k.dtype, k.size, k.is_signed, big && k.size > 1};
  return std::nullopt;
}

// The header dict, a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header h;
    bool seen[3] = {false, false, false};
    expect('{');
    while (!peek('}')) {
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (peek('[')) fail("structured dtypes (a list descr) are not supported");
        h.descr = string_literal();
        seen[0] = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen[1] = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen[2] = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!eat(',')) break;
    }
    expect('}');
    skip_space();
    if (i_ != s_.size()) fail("text after the closing '}'");
    const char* names[3] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k)
      if (!seen[k]) fail(std::string("missing key '") + names[k] + "'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string shown(s_.substr(0, 200));
    throw_error("load_npy: '", path_, "': bad header: ", what, " (at offset ", i_, " of \"", shown,
                s_.size() > 200 ? "...\")" : "\")");
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string");
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      size_t n = std::strlen(word);
      if (s_.substr(i_, n) == word) {
        i_ += n;
        return value;
      }
    }
    fail("expected True or False");
  }
  Shape tuple() {
    Shape out;
    expect('(');
    while (!peek(')')) {
      size_t start = i_;
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("dim too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) fail("expected a non-negative integer in the shape");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long literals
      out.push_back(v);
      if (!eat(',')) break;
    }
    expect(')');
    return out;
  }

  std::string_view s_;
  const std::string& path_;
  size_t i_ = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void byte_swap(uint8_t* p, size_t count, size_t size) {
  for (size_t i = 0; i < count; ++i, p += size)
    for (size_t a = 0, b = size - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

uint64_t load_uint(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t k = n; k-- > 0;) v = v << 8 | p[k];
  return v;
}

}  // namespace

std::string npy_header(const Shape& shape, DType dtype) {
  std::string dict = "{'descr': '" + descr_of(dtype) + "', 'fortran_order': False, 'shape': " +
                     python_tuple(shape) + ", }";
  if (!shape.empty()) dict.append(kGrowthDigits - std::to_string(shape[0]).size(), ' ');
  for (int major : {1, 2}) {
    size_t len_bytes = major == 1 ? 2 : 4;
    size_t hlen = dict.size() + 1;
    size_t pad = kAlign - (kMagic.size() + 2 + len_bytes + hlen) % kAlign;
    size_t total = hlen + pad;
    if (major == 1 && total > 0xffff) continue;
    std::string out(kMagic);
    out += char(major);
    out += char(0);
    for (size_t k = 0; k < len_bytes; ++k) out += char((total >> (8 * k)) & 0xff);
    return out + dict + std::string(pad, ' ') + "\n";
  }
  throw_error("save_npy: header of shape ", to_string(shape), " is too large");
}

void save_npy(const std::string& path, const Tensor& tensor) {
  KILN_CHECK(tensor.defined(), "save_npy: cannot save an undefined tensor to '", path, "'");
  KILN_CHECK(tensor.dtype() != DType::bf16, "save_npy: cannot save '", path, "': dtype bf16 has no "
             "NumPy equivalent; convert it first, e.g. save_npy(path, x.to(f32))");
  KILN_CHECK(tensor.device().is_cpu(), "save_npy: cannot save '", path, "': the tensor is on ",
             tensor.device(), "; move it with to(Device::cpu()) first");
  std::string header = npy_header(tensor.shape(), tensor.dtype());
  Tensor c = tensor.contiguous();
  write_file_atomic("save_npy", path, {{header.data(), header.size()}, {c.data_ptr(), size_t(c.numel()) * itemsize(c.dtype())}});
}

Tensor load_npy(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw_error("load_npy: cannot open '", path, "': ", std::strerror(errno));
  std::FILE* f = file.get();
  auto fail = [&](auto&&... parts) { throw_error("load_npy: '", path, "': ", parts...); };

  uint8_t pre[12];
  size_t got = std::fread(pre, 1, 8, f);
  if (got < kMagic.size() || std::memcmp(pre, kMagic.data(), kMagic.size()) != 0)
    fail("not a .npy file (bad magic string; expected \\x93NUMPY)");
  if (got < 8) fail("truncated header (file ends inside the version bytes)");
  int major = pre[6], minor = pre[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    fail("unsupported format version ", major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  size_t len_bytes = major == 1 ? 2 : 4;
  if (std::fread(pre + 8, 1, len_bytes, f) != len_bytes) fail("truncated header (file ends inside the header length)");
  size_t hlen = size_t(load_uint(pre + 8, len_bytes));
  std::string text(hlen, '\0');
  size_t hgot = std::fread(text.data(), 1, hlen, f);
  if (hgot != hlen) fail("truncated header (", hgot, " of ", hlen, " bytes)");
  Header h = HeaderParser(text, path).parse();

  std::optional<FileDType> fd = parse_descr(h.descr);
  if (!fd)
    fail("unsupported dtype '", h.descr, "' (kiln reads f2 f4 f8 i4 i8 b1, and widens i1 u1 i2 u2 "
         "to i32 and u4 to i64)");
  int64_t n = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && n > INT64_MAX / int64_t(fd->itemsize) / d)
      fail("shape ", to_string(h.shape), " is too large");
    n *= d;
  }
  uint64_t need = uint64_t(n) * fd->itemsize;
  long data_start = long(8 + len_bytes + hlen);
  if (std::fseek(f, 0, SEEK_END) != 0) fail("cannot seek: ", std::strerror(errno));
  uint64_t have = uint64_t(std::ftell(f) - data_start);
  if (have < need)
    fail("truncated data: shape ", to_string(h.shape), " of '", h.descr, "' needs ", need,
         " bytes, the file holds ", have);
  if (have > need)
    fail("data size mismatch: shape ", to_string(h.shape), " of '", h.descr, "' needs ", need,
         " bytes, the file holds ", have, " (", have - need, " extra)");
  std::fseek(f, data_start, SEEK_SET);

  Shape stored = h.shape;
  if (h.fortran_order) std::reverse(stored.begin(), stored.end());
  Tensor t = Tensor::empty(stored, {fd->dtype, Device::cpu()});
  bool widen = fd->itemsize != itemsize(fd->dtype);
  std::vector<uint8_t> raw(widen ? size_t(need) : 0);
  uint8_t* dst = widen ? raw.data() : static_cast<uint8_t*>(t.data_ptr());
  if (need > 0 && std::fread(dst, 1, size_t(need), f) != size_t(need))
    fail("read failed: ", std::strerror(errno));
  if (fd->big_endian) byte_swap(dst, size_t(n), fd->itemsize);
  if (fd->dtype == DType::bool_) {
    for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] != 0;
  } else if (widen) {
    for (int64_t i = 0; i < n; ++i) {
      uint64_t u = load_uint(dst + size_t(i) * fd->itemsize, fd->itemsize);
      int64_t v = int64_t(u);
      if (fd->is_signed && fd->itemsize < 8 && (u >> (8 * fd->itemsize - 1)) & 1)
        v = int64_t(u | (~uint64_t(0) << (8 * fd->itemsize)));  // sign-extend
      store_from_double(t.data_ptr(), fd->dtype, i, double(v));
    }
  }
  if (!h.fortran_order || t.dim() < 2) return t;
  std::vector<int64_t> reversed;
  for (int64_t d = t.dim(); d-- > 0;) reversed.push_back(d);
  return t.permute(reversed).contiguous();
}

}  // namespace kiln
