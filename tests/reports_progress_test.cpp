// Tier 1: progress lines (reports/progress.hpp): where they go and how often.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "reports/progress.hpp"

using twin::reports::Progress;

namespace {
std::string contents(std::FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}
}  // namespace

TEST_SUITE("reports.progress") {
  TEST_CASE("off a terminal: a line per interval and one at the end; silent when quiet") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    {
      Progress p("sweep: points", 3, f, 0);  // interval 0: every item
      p.done();
      p.done();
      p.done();
    }
    const auto s = contents(f);
    CHECK(s.find("twin: sweep: points 1/3 (33%)") != std::string::npos);
    CHECK(s.find("twin: sweep: points 2/3 (67%)") != std::string::npos);
    CHECK(s.find("twin: sweep: points 3/3 (100%)") != std::string::npos);  // the final line
    CHECK(s.find('\r') == std::string::npos);                              // no redraws in a log
    std::fclose(f);
    {
      Progress quiet("x", 2, nullptr);
      quiet.done();  // nothing to write to: nothing happens
    }
    std::FILE* g = std::tmpfile();
    {
      Progress slow("x", 10, g, 3600);
      slow.done();  // within the interval: no line until the end
    }
    CHECK(contents(g) == "twin: x 1/10 (10%), 0 s\n");
    std::fclose(g);
  }
}
