#include "dsl/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "dsl/error.h"

namespace kiln {

void write_file_atomic(std::string_view op, const std::string& path,
                       const std::vector<std::pair<const void*, size_t>>& parts) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path p(path);
  std::filesystem::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp-" +
                                                 std::to_string(::getpid()) + "-" + std::to_string(counter++));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw_error(op, ": cannot write '", path, "': ", std::strerror(errno));
  auto fail = [&](const char* what) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_error(op, ": cannot write '", path, "': ", what, ": ", std::strerror(e));
  };
  auto write_all = [&](const void* src, size_t n) {
    auto* b = static_cast<const uint8_t*>(src);
    while (n > 0) {
      ssize_t w = ::write(fd, b, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write failed");
      b += w;
      n -= size_t(w);
    }
  };
  for (const auto& [data, nbytes] : parts) write_all(data, nbytes);
  if (::fsync(fd) != 0) fail("fsync failed");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_error(op, ": cannot write '", path, "': close failed: ", std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_error(op, ": cannot write '", path, "': rename failed: ", std::strerror(e));
  }
}


std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace kiln
