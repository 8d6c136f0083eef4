// Output files are written atomically: to a temporary file beside the target, then renamed, so
// a reader never sees half a result and an interrupted run leaves the old file (or none).
#pragma once

#include <filesystem>
#include <string>

namespace twin::reports {

// Throws std::runtime_error naming the file on failure.
void write_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace twin::reports
