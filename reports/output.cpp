#include "reports/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace twin::reports {

void write_atomic(const std::filesystem::path& path, const std::string& content) {
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path.string() + ": cannot write: " + std::strerror(errno));
    out << content;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      throw std::runtime_error(path.string() + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw std::runtime_error(path.string() + ": cannot rename into place: " + ec.message());
  }
}

}  // namespace twin::reports
