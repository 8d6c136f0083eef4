#include "reports/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace twin::reports {

Progress::Progress(std::string what, std::size_t total, std::FILE* out, double interval_s)
    : what_(std::move(what)),
      total_(total),
      out_(out),
      tty_(out != nullptr && isatty(fileno(out)) != 0),
      interval_s_(tty_ ? 0.2 : interval_s),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() {
  if (out_ != nullptr && done_ > 0) print(true);
}

void Progress::done() {
  if (out_ == nullptr) return;
  const std::lock_guard<std::mutex> lock(m_);
  ++done_;
  const auto now = std::chrono::steady_clock::now();
  if (done_ < total_ && std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  if (done_ < total_) print(false);
}

void Progress::print(bool final) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double left = done_ > 0 && done_ < total_
                          ? s / static_cast<double>(done_) * static_cast<double>(total_ - done_)
                          : 0;
  const std::string line = fmt::format(
      "twin: {} {}/{} ({:.0f}%), {:.0f} s{}", what_, done_, total_,
      100.0 * static_cast<double>(done_) / static_cast<double>(std::max<std::size_t>(total_, 1)), s,
      final ? "" : fmt::format(", ~{:.0f} s left", left));
  if (tty_)
    fmt::print(out_, "\r{:<78}{}", line, final ? "\n" : "");
  else
    fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

}  // namespace twin::reports
