// Progress of long commands (sweep, plan-dp, ladder, report) on stderr, never on stdout (issue
// #19 item 2): on a terminal a line redrawn in place at most 5 times a second; otherwise (a log,
// CI) a line every `interval_s` seconds and one at the end. Thread-safe: workers call done().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>

namespace twin::reports {

class Progress {
 public:
  // `out` null: silent (--quiet). interval_s: seconds between lines when `out` is no terminal.
  Progress(std::string what, std::size_t total, std::FILE* out, double interval_s = 5);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();
  void done();  // one item finished

 private:
  void print(bool final);
  std::string what_;
  std::size_t total_, done_ = 0;
  std::FILE* out_;
  bool tty_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_, last_;
  std::mutex m_;
};

}  // namespace twin::reports
