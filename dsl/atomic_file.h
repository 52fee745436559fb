// Files written whole and read whole. Writing so that readers see the old contents or the new,
// never a torn file: the bytes go to a temporary file in the same directory, are synced, then
// renamed over `path`. Errors are kiln::Error naming `op` and the path; the temporary file is
// removed on failure.
//
//   write_file_atomic("save_npy", path, {{header.data(), header.size()}, {data, nbytes}});
//   std::optional<std::string> bytes = read_file(path);   // nullopt: it cannot be opened
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

void write_file_atomic(std::string_view op, const std::string& path,
                       const std::vector<std::pair<const void*, size_t>>& parts);

// The file's bytes, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::string& path);

}  // namespace kiln
