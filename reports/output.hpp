// Output files are written atomically: to a temporary file beside the target, then renamed, so
// a reader never sees half a result and an interrupted run leaves the old file (or none).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace twin::reports {

// An output that could not be written (disk full, a folder removed meanwhile): not bad input,
// not a bug — the command exits 1 with this message.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Makes SIGINT and SIGTERM remove the temporary file of a write in progress before the process
// ends as the signal says (main calls it once).
void remove_temporaries_on_signals();

// Throws OutputError naming the file on failure. Temporary files of earlier runs killed before
// their rename (FILE.tmp.PID of a process that no longer exists) are removed first.
void write_atomic(const std::filesystem::path& path, const std::string& content);
// `content` gzip-compressed (zlib, level 6, no file name or time in the header: the same bytes
// for the same content), for outputs named *.gz.
std::string gzip(const std::string& content);
bool gzip_named(const std::filesystem::path& path);
// The content of a gzip (or zlib) stream; std::runtime_error if it is not one, or cut short.
std::string gunzip(const std::string& compressed);

// Why `path` cannot be an output — a symbolic link (its target is not replaced), a device, folder
// or pipe, a folder that does not exist or cannot be written, a file that cannot be written, or
// one of the command's inputs — or "" if it can. Checked before any work.
std::string output_problem(const std::filesystem::path& path,
                           const std::vector<std::filesystem::path>& inputs);

}  // namespace twin::reports
