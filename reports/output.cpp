#include "reports/output.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>

namespace twin::reports {

namespace fs = std::filesystem;

namespace {

// The temporary file being written, for the signal handler (async-signal-safe: a fixed buffer,
// unlink, signal, raise).
char g_tmp[4096];
volatile std::sig_atomic_t g_tmp_set = 0;

extern "C" void on_signal(int sig) {
  if (g_tmp_set) ::unlink(g_tmp);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct TmpGuard {
  explicit TmpGuard(const fs::path& p) {
    const std::string s = p.string();
    if (s.size() < sizeof(g_tmp)) {
      std::memcpy(g_tmp, s.c_str(), s.size() + 1);
      g_tmp_set = 1;
    }
  }
  ~TmpGuard() { g_tmp_set = 0; }
};

// Leftovers of runs killed between writing and renaming (SIGKILL cannot be caught).
void remove_stale_temporaries(const fs::path& path) {
  std::error_code ec;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
      continue;
    const int p = std::stoi(pid);
    if (p != ::getpid() && ::kill(p, 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace

void remove_temporaries_on_signals() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

void write_atomic(const fs::path& path, const std::string& content) {
  remove_stale_temporaries(path);
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  const TmpGuard guard(tmp);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw OutputError(path.string() + ": cannot write: " + std::strerror(errno));
    out << content;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw OutputError(path.string() + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw OutputError(path.string() + ": cannot rename into place: " + ec.message());
  }
}

std::string gzip(const std::string& content) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw OutputError("gzip: cannot start zlib");
  std::string out(deflateBound(&z, static_cast<uLong>(content.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data()));
  z.avail_in = static_cast<uInt>(content.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw OutputError("gzip: compression failed");
  return out;
}

std::string gunzip(const std::string& compressed) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK)
    throw std::runtime_error("gunzip: cannot start zlib");  // gzip or zlib
  std::string out;
  char buf[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("not a complete gzip stream");
  return out;
}

bool gzip_named(const fs::path& path) {
  return path.extension() == ".gz";
}

std::string output_problem(const fs::path& path, const std::vector<fs::path>& inputs) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (st.type() == fs::file_type::symlink) return "a symbolic link (name the file it points to)";
  const bool exists = fs::exists(st);
  if (exists && st.type() != fs::file_type::regular)
    return "not a regular file (a device, folder or pipe is never replaced)";
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return "its folder " + dir.string() + " does not exist";
  if (::access(dir.c_str(), W_OK) != 0) return "its folder " + dir.string() + " cannot be written";
  if (exists && ::access(path.c_str(), W_OK) != 0) return "the file cannot be written";
  for (const auto& in : inputs)
    if (exists && fs::exists(in, ec) && fs::equivalent(path, in, ec))
      return "it is an input of this command";
  return "";
}

}  // namespace twin::reports
