// Writing a file so that readers see the old contents or the new, never a torn file: the bytes go
// to a temporary file in the same directory, are synced, then renamed over `path`. Errors are
// kiln::Error naming `op` and the path; the temporary file is removed on failure.
//
//   write_file_atomic("save_npy", path, {{header.data(), header.size()}, {data, nbytes}});
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

void write_file_atomic(std::string_view op, const std::string& path,
                       const std::vector<std::pair<const void*, size_t>>& parts);

}  // namespace kiln
