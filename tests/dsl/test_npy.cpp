// .npy files: round trips of every dtype and several shapes (0-d, empty, non-contiguous), the
// exact bytes of one file, hand-written files in the forms NumPy produces (versions 2.0 and 3.0,
// big-endian, Fortran order, small integer types) and malformed files, each with its error.

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A version 1.0 file: magic, version, header length, the dict padded with spaces to a multiple
// of 64 bytes (ending in '\n'), then `data`.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t hlen = dict.size() + 1;
  hlen += (64 - (6 + 2 + len_bytes + hlen) % 64) % 64;
  std::string out = std::string("\x93NUMPY", 6) + char(major) + char(0);
  for (size_t k = 0; k < len_bytes; ++k) out += char((hlen >> (8 * k)) & 0xff);
  std::string header = dict;
  header.resize(hlen - 1, ' ');
  return out + header + "\n" + data;
}

template <typename T>
std::string le_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
std::string be_bytes(const std::vector<T>& v) {
  std::string s = le_bytes(v);
  for (size_t i = 0; i < v.size(); ++i) std::reverse(s.begin() + i * sizeof(T), s.begin() + (i + 1) * sizeof(T));
  return s;
}

void check_same(const Tensor& got, const Tensor& want, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(got.dtype() == want.dtype());
    BOOST_TEST(to_string(got.shape()) == to_string(want.shape()));
    BOOST_TEST(got.is_contiguous());
    BOOST_TEST(host_values(got) == host_values(want));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trips_every_dtype_and_shape) {
  TempDir dir("kiln_test_npy");
  uint64_t seed = 1;
  for (DType t : {f32, f64, f16, i32, i64, bool_}) {
    for (const Shape& s : std::vector<Shape>{{}, {0}, {5}, {2, 3}, {2, 0, 3}, {3, 1, 4, 2}, {2, 3, 1, 2, 3, 2}}) {
      Tensor x = random_tensor(s, t, seed++, -100, 100);
      std::string path = dir.file("x.npy");
      save_npy(path, x);
      check_same(load_npy(path), x, std::string(name(t)) + " " + to_string(s));
      BOOST_TEST(file_bytes(path).size() % 64 == size_t(x.numel()) * itemsize(t) % 64);
    }
  }
}

BOOST_AUTO_TEST_CASE(non_contiguous_tensors_save_their_logical_values) {
  TempDir dir("kiln_test_npy");
  uint64_t seed = 100;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (DType t : {f32, i64, bool_, f16}) {
      Tensor x = random_view({3, 4, 5}, t, seed++, kind);
      std::string path = dir.file(std::string(kind) + ".npy");
      save_npy(path, x);
      Tensor y = load_npy(path);
      check_same(y, x.contiguous(), std::string(kind) + " " + std::string(name(t)));
      BOOST_TEST(!y.shares_storage_with(x));
    }
  }
}

BOOST_AUTO_TEST_CASE(file_bytes_match_numpy_exactly) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("small.npy");
  save_npy(path, from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  // What numpy.save(np.arange(1, 7, dtype='<f4').reshape(2, 3)) writes: version 1.0, header
  // length 118, the dict, 58 spaces (20 for in-place growth of the first dim, the rest to align
  // the data at byte 128), '\n', then the values.
  std::string want = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') +
                     "\n" + le_bytes<float>({1, 2, 3, 4, 5, 6});
  BOOST_TEST(file_bytes(path) == want);
  BOOST_TEST(npy_header({2, 3}, f32) == want.substr(0, 128));

  std::string h0 = npy_header({}, f64);  // 0-d: no growth space
  BOOST_TEST(h0.size() == 128u);
  BOOST_TEST(h0.substr(10, 55) == "{'descr': '<f8', 'fortran_order': False, 'shape': (), }");
  BOOST_TEST(npy_header({7}, bool_).find("'descr': '|b1'") != std::string::npos);
  BOOST_TEST(npy_header({7}, bool_).find("'shape': (7,), }") != std::string::npos);
  for (DType t : {f32, f64, f16, i32, i64, bool_}) {
    for (const Shape& s : std::vector<Shape>{{}, {1}, {123456789, 2}, {1, 2, 3, 4, 5, 6, 7, 8}}) {
      std::string h = npy_header(s, t);
      BOOST_TEST(h.size() % 64 == 0u);
      BOOST_TEST(h.back() == '\n');
    }
  }
}

BOOST_AUTO_TEST_CASE(huge_headers_use_version_2) {
  TempDir dir("kiln_test_npy");
  Shape s(30000, 1);  // a header past 64 KiB
  Tensor x = random_tensor(s, f32, 200);
  std::string path = dir.file("wide.npy");
  save_npy(path, x);
  std::string bytes = file_bytes(path);
  BOOST_TEST(int(bytes[6]) == 2);
  BOOST_TEST((bytes.size() - 4) % 64 == 0u);
  check_same(load_npy(path), x, "version 2.0 round trip");
}

BOOST_AUTO_TEST_CASE(reads_versions_2_and_3) {
  TempDir dir("kiln_test_npy");
  for (int major : {1, 2, 3}) {
    std::string path = dir.file("v.npy");
    write_bytes(path, npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                               le_bytes<int64_t>({-1, 0, int64_t(1) << 40}), major));
    BOOST_TEST(load_npy(path).to_vector<int64_t>() == std::vector<int64_t>({-1, 0, int64_t(1) << 40}));
  }
}

BOOST_AUTO_TEST_CASE(reads_big_endian_files) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("be.npy");
  write_bytes(path, npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }",
                             be_bytes<float>({1.5f, -2, 3.25f, 1e30f})));
  check_same(load_npy(path), from_vector<float>({1.5f, -2, 3.25f, 1e30f}, {2, 2}), ">f4");
  write_bytes(path, npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }",
                             be_bytes<double>({0.1, -1e-300})));
  check_same(load_npy(path), from_vector<double>({0.1, -1e-300}), ">f8");
  write_bytes(path, npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }",
                             be_bytes<int32_t>({-7, 65536, 2147483647})));
  check_same(load_npy(path), from_vector<int32_t>({-7, 65536, 2147483647}), ">i4");
  write_bytes(path, npy_file("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }",
                             be_bytes<int64_t>({-(int64_t(1) << 50)})));
  BOOST_TEST(load_npy(path).item<int64_t>() == -(int64_t(1) << 50));
  write_bytes(path, npy_file("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }",
                             be_bytes<uint16_t>({float_to_half(0.5f), float_to_half(-3)})));
  Tensor h = load_npy(path);
  BOOST_TEST(h.dtype() == f16);
  BOOST_TEST(h.to_vector<double>() == std::vector<double>({0.5, -3}));
}

BOOST_AUTO_TEST_CASE(reads_fortran_order) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("f.npy");
  // The 2 x 3 matrix [[1, 2, 3], [4, 5, 6]] stored column by column.
  write_bytes(path, npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                             le_bytes<double>({1, 4, 2, 5, 3, 6})));
  check_same(load_npy(path), from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}), "2-d Fortran order");
  // A 2 x 3 x 4 array: element (i, j, k) sits at i + 2 j + 6 k.
  std::vector<int32_t> data(24), want(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        int v = 100 * i + 10 * j + k;
        data[size_t(i + 2 * j + 6 * k)] = v;
        want[size_t(12 * i + 4 * j + k)] = v;
      }
  write_bytes(path, npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", le_bytes(data)));
  check_same(load_npy(path), from_vector<int32_t>(want, {2, 3, 4}), "3-d Fortran order");
  write_bytes(path, npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", le_bytes<int32_t>({7, 8, 9})));
  check_same(load_npy(path), from_vector<int32_t>({7, 8, 9}), "1-d Fortran order");
}

BOOST_AUTO_TEST_CASE(widens_small_integer_types) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("small.npy");
  write_bytes(path, npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x7f\xff", 3)));
  check_same(load_npy(path), from_vector<int32_t>({0, 127, 255}), "|u1");
  write_bytes(path, npy_file("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", std::string("\x80\xff\x05", 3)));
  check_same(load_npy(path), from_vector<int32_t>({-128, -1, 5}), "|i1");
  write_bytes(path, npy_file("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", le_bytes<int16_t>({-30000, 300})));
  check_same(load_npy(path), from_vector<int32_t>({-30000, 300}), "<i2");
  write_bytes(path, npy_file("{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }", be_bytes<uint16_t>({65535, 2})));
  check_same(load_npy(path), from_vector<int32_t>({65535, 2}), ">u2");
  write_bytes(path, npy_file("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", le_bytes<uint32_t>({4294967295u, 1})));
  check_same(load_npy(path), from_vector<int64_t>({4294967295ll, 1}), "<u4");
  // Any nonzero byte of a bool file reads as true.
  write_bytes(path, npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x01\x02", 3)));
  check_same(load_npy(path), from_vector<bool>({false, true, true}), "|b1");
}

BOOST_AUTO_TEST_CASE(accepts_header_spellings_numpy_accepts) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("h.npy");
  for (std::string dict : {"{\"shape\": (2,), \"descr\": \"<f4\", \"fortran_order\": False}",
                           "{ 'fortran_order' : False , 'shape' : ( 2 , ) , 'descr' : '<f4' , }",
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }"}) {
    write_bytes(path, npy_file(dict, le_bytes<float>({1, 2})));
    check_same(load_npy(path), from_vector<float>({1, 2}), dict);
  }
}

BOOST_AUTO_TEST_CASE(malformed_files_raise_errors) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("bad.npy");
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string ok_data = le_bytes<float>({1, 2, 3, 4, 5, 6});
  struct Case {
    std::string bytes;
    std::vector<std::string> parts;
  };
  std::string good = npy_file(ok_dict, ok_data);
  std::string v4 = good;
  v4[6] = 4;
  std::vector<Case> cases = {
      {"", {"bad magic"}},
      {"\x93NUMP", {"bad magic"}},
      {"PK\x03\x04 a zip file, not an npy file", {"bad magic"}},
      {std::string("\x93NUMPY\x01", 7), {"truncated header", "version"}},
      {std::string("\x93NUMPY\x01\x00\x76", 9), {"truncated header", "header length"}},
      {v4, {"unsupported format version 4.0"}},
      {good.substr(0, 60), {"truncated header", "50 of 118 bytes"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", ok_data), {"bad header", "expected '}'"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", ok_data), {"bad header", "quoted string"}},
      {npy_file("['descr', '<f4']", ok_data), {"bad header", "expected '{'"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False}", ok_data), {"bad header", "missing key 'shape'"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", ok_data),
       {"bad header", "unexpected key 'extra'"}},
      {npy_file("{'descr': '<f4', 'fortran_order': maybe, 'shape': (6,)}", ok_data), {"bad header", "True or False"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", ok_data),
       {"bad header", "non-negative integer"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} trailing", ok_data),
       {"bad header", "after the closing"}},
      {npy_file("{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}", ok_data), {"bad header"}},
      {npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}", ok_data),
       {"bad header", "structured"}},
      {npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", ok_data), {"unsupported dtype '<c8'"}},
      {npy_file("{'descr': '<u8', 'fortran_order': False, 'shape': (3,)}", ok_data), {"unsupported dtype '<u8'"}},
      {npy_file("{'descr': '<U5', 'fortran_order': False, 'shape': (1,)}", ok_data), {"unsupported dtype '<U5'"}},
      {npy_file(ok_dict, ok_data.substr(0, 20)), {"truncated data", "[2, 3]", "'<f4'", "24 bytes", "holds 20"}},
      {npy_file(ok_dict, ""), {"truncated data", "holds 0"}},
      {npy_file(ok_dict, ok_data + "xyz"), {"data size mismatch", "[2, 3]", "24 bytes", "holds 27", "3 extra"}},
      {npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}", ok_data), {"data size mismatch", "[5]"}},
      {npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", ok_data),
       {"too large"}},
  };
  for (const Case& c : cases) {
    write_bytes(path, c.bytes);
    std::vector<std::string> parts = c.parts;
    parts.push_back("load_npy");
    parts.push_back(path);
    BOOST_TEST_CONTEXT("case expecting '" << c.parts[0] << "'") { check_error([&] { load_npy(path); }, parts); }
  }
  check_error([&] { load_npy(dir.file("missing.npy")); }, {"load_npy", "missing.npy", "cannot open", "No such file"});
  check_error([&] { load_npy(dir.path.string()); }, {"load_npy", dir.path.string()});  // a directory
}

BOOST_AUTO_TEST_CASE(save_errors_and_atomic_writes) {
  TempDir dir("kiln_test_npy");
  std::string path = dir.file("x.npy");
  check_error([&] { save_npy(path, random_tensor({2, 2}, bf16, 1)); }, {"save_npy", path, "bf16", "to(f32)"});
  BOOST_TEST(!fs::exists(path));
  check_error([&] { save_npy(dir.file("no/such/dir/x.npy"), random_tensor({2}, f32, 2)); },
              {"save_npy", "no/such/dir/x.npy", "cannot write"});
  check_error([&] { save_npy(dir.path.string(), random_tensor({2}, f32, 3)); }, {"save_npy", "cannot write"});

  // Overwriting replaces the whole file, and no temporary files stay behind.
  Tensor big = random_tensor({100, 100}, f64, 4), small = random_tensor({3}, i32, 5);
  save_npy(path, big);
  save_npy(path, small);
  check_same(load_npy(path), small, "overwritten file");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
    BOOST_TEST(e.path().filename() == "x.npy");
  }
  BOOST_TEST(files == 1u);
}

// Only where python3 with numpy is installed: numpy reads what kiln writes and kiln reads what
// numpy writes (including Fortran order and big-endian arrays).
BOOST_AUTO_TEST_CASE(interoperates_with_numpy_when_available) {
  if (std::system("python3 -c 'import numpy' > /dev/null 2>&1") != 0) {
    BOOST_TEST_MESSAGE("skipped: python3 with numpy is not available");
    return;
  }
  TempDir dir("kiln_test_npy");
  Tensor x = random_tensor({3, 4}, f32, 300);
  save_npy(dir.file("x.npy"), x);
  std::string script =
      "import numpy as np, sys; d = sys.argv[1]; x = np.load(d + '/x.npy'); "
      "np.save(d + '/double.npy', x.astype('<f8') * 2); "
      "np.save(d + '/fortran.npy', np.asfortranarray(x)); "
      "np.save(d + '/big.npy', x.astype('>f4'))";
  int rc = std::system(("python3 -c \"" + script + "\" " + dir.path.string()).c_str());
  BOOST_TEST_REQUIRE(rc == 0);
  std::vector<double> want;
  for (double v : host_values(x)) want.push_back(2 * double(float(v)));
  check_close(load_npy(dir.file("double.npy")), want, {3, 4}, "numpy doubled");
  check_same(load_npy(dir.file("fortran.npy")), x, "numpy Fortran order");
  check_same(load_npy(dir.file("big.npy")), x, "numpy big-endian");
}
