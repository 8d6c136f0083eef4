#include "hardware/nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace twin::hardware {

double bus_factor(CollKind k, int ranks) {
  const double f = static_cast<double>(ranks - 1) / ranks;
  return k == CollKind::all_reduce ? 2 * f : f;
}

const char* nccl_tests_program(CollKind k) {
  switch (k) {
    case CollKind::all_gather:
      return "all_gather_perf";
    case CollKind::reduce_scatter:
      return "reduce_scatter_perf";
    case CollKind::all_reduce:
      return "all_reduce_perf";
    case CollKind::all_to_all:
      return "alltoall_perf";
  }
  return "";
}

NcclTestsRow nccl_tests_row(CollKind k, int ranks, double bytes, double seconds) {
  NcclTestsRow r;
  r.size_B = bytes;
  r.count = bytes / 4;  // float elements, as nccl-tests counts by default
  r.redop = k == CollKind::all_gather || k == CollKind::all_to_all ? "none" : "sum";
  r.time_us = seconds * 1e6;
  r.algbw_GBps = bytes / seconds / 1e9;
  r.busbw_GBps = r.algbw_GBps * bus_factor(k, ranks);
  return r;
}

std::string format_nccl_tests(const NcclTestsRun& run, const std::string& note) {
  std::string s = fmt::format("# Collective test starting: {}\n", nccl_tests_program(run.kind));
  if (!note.empty()) s += "# " + note + "\n";
  s += "#\n# Using devices\n";
  if (run.max_ctas > 0)
    s += fmt::format("# NCCL INFO NCCL_MAX_CTAS set by environment to {}.\n", run.max_ctas);
  for (int r = 0; r < run.ranks; ++r)
    s += fmt::format(
        "#  Rank {:2d} Group  0 Pid      0 on       twin device {:2d} [0000:00:00] {}\n", r, r,
        run.device);
  s += "#\n";
  s += fmt::format(
      "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}           out-of-place                       "
      "in-place\n",
      "", "", "", "", "");
  s += fmt::format(
      "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  "
      "{:>6s}  {:>6s}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong");
  s += fmt::format(
      "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  "
      "{:>6s}  {:>6s}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "");
  double sum = 0;
  for (const auto& r : run.rows) {
    s += fmt::format(
        "{:12.0f}  {:12.0f}  {:>8s}  {:>6s}  {:>6d}  {:7.2f}  {:6.2f}  {:6.2f}     N/A\n", r.size_B,
        r.count, r.type, r.redop, -1, r.time_us, r.algbw_GBps, r.busbw_GBps);
    sum += r.busbw_GBps;
  }
  s += "# Out of bounds values : 0 OK\n";
  s += fmt::format("# Avg bus bandwidth    : {:g}\n#\n",
                   run.rows.empty() ? 0.0 : sum / run.rows.size());
  s += fmt::format("# Collective test concluded: {}\n", nccl_tests_program(run.kind));
  return s;
}

namespace {

CollKind kind_of_program(const std::string& name, int line) {
  static const std::map<std::string, CollKind> kinds = {
      {"all_gather_perf", CollKind::all_gather},
      {"reduce_scatter_perf", CollKind::reduce_scatter},
      {"all_reduce_perf", CollKind::all_reduce},
      {"alltoall_perf", CollKind::all_to_all}};
  std::string base = name.substr(name.find_last_of('/') + 1);
  if (const auto mpi = base.find("_mpi"); mpi != std::string::npos)
    base.erase(mpi);  // all_reduce_perf_mpi
  const auto it = kinds.find(base);
  if (it == kinds.end())
    throw std::invalid_argument(
        fmt::format("line {}: test \"{}\": expected all_gather_perf, reduce_scatter_perf, "
                    "all_reduce_perf or alltoall_perf",
                    line, name));
  return it->second;
}

constexpr std::string_view kMaxCtas = "NCCL_MAX_CTAS set by environment to ";

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

double number(std::string w, int line, const char* what) {
  if (!w.empty() && w.back() == '.') w.pop_back();  // the end of an INFO sentence
  try {
    std::size_t used = 0;
    const double v = std::stod(w, &used);
    if (used == w.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("line {}: {} \"{}\": expected a number", line, what, w));
}

// Where the columns are: by the header's names (the first time/algbw/busbw: out-of-place).
struct Columns {
  int size = -1, count = -1, type = -1, redop = -1, time = -1, algbw = -1, busbw = -1;
};

Columns columns_of(const std::vector<std::string>& header) {
  Columns c;
  for (int i = 0; i < static_cast<int>(header.size()); ++i) {
    const auto& h = header[static_cast<std::size_t>(i)];
    int* slot = h == "size"                     ? &c.size
                : h == "count"                  ? &c.count
                : h == "type"                   ? &c.type
                : h == "redop"                  ? &c.redop
                : h == "time" || h == "cputime" ? &c.time
                : h == "algbw"                  ? &c.algbw
                : h == "busbw"                  ? &c.busbw
                                                : nullptr;
    if (slot && *slot < 0) *slot = i - 1;  // the header's words follow its leading '#'
  }
  return c;
}

// A result line's row under the header's columns; nullopt for a line that is not one (too few
// words, not starting with a size).
std::optional<NcclTestsRow> result_row(const std::vector<std::string>& w, const Columns& cols,
                                       int n) {
  const int need =
      std::max({cols.size, cols.count, cols.type, cols.redop, cols.time, cols.algbw, cols.busbw});
  if (static_cast<int>(w.size()) <= need || !std::isdigit(static_cast<unsigned char>(w[0][0])))
    return std::nullopt;
  auto at = [&w](int c) -> const std::string& { return w[static_cast<std::size_t>(c)]; };
  NcclTestsRow r;
  r.size_B = number(at(cols.size), n, "size");
  if (cols.count >= 0) r.count = number(at(cols.count), n, "count");
  if (cols.type >= 0) r.type = at(cols.type);
  if (cols.redop >= 0) r.redop = at(cols.redop);
  r.time_us = number(at(cols.time), n, "time");
  r.algbw_GBps = number(at(cols.algbw), n, "algbw");
  r.busbw_GBps = number(at(cols.busbw), n, "busbw");
  return r;
}

}  // namespace

std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text) {
  std::vector<NcclTestsRun> runs;
  std::istringstream in(text);
  Columns cols;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const auto w = words(line);
    if (w.empty()) continue;
    if (line.rfind("# Collective test starting:", 0) == 0) {
      if (w.size() < 5) throw std::invalid_argument(fmt::format("line {}: no test named", n));
      runs.push_back({kind_of_program(w[4], n), 0, "", 0, {}});
      cols = {};
      continue;
    }
    if (const auto at = line.find(kMaxCtas); at != std::string::npos && !runs.empty()) {
      runs.back().max_ctas = static_cast<int>(
          number(words(line.substr(at + kMaxCtas.size())).at(0), n, "NCCL_MAX_CTAS"));
      continue;
    }
    if (w[0] == "#" && w.size() > 1 && w[1] == "Rank" && !runs.empty()) {
      if (runs.back().ranks++ == 0) {
        const auto close = line.find(']');
        runs.back().device =
            close == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', close + 1));
      }
      continue;
    }
    if (w[0] == "#" && w.size() > 2 && w[1] == "size" && w[2] == "count") {
      cols = columns_of(w);
      if (cols.time < 0 || cols.busbw < 0 || cols.algbw < 0)
        throw std::invalid_argument(
            fmt::format("line {}: a header without time, algbw and busbw", n));
      continue;
    }
    if (line[line.find_first_not_of(' ')] == '#' || cols.size < 0)
      continue;  // comments, NCCL's INFO lines
    if (runs.empty())
      throw std::invalid_argument(
          fmt::format("line {}: a result before \"# Collective test starting\"", n));
    if (auto r = result_row(w, cols, n)) runs.back().rows.push_back(*r);
  }
  for (const auto& r : runs)
    if (r.ranks < 2)
      throw std::invalid_argument(
          fmt::format("{}: fewer than two \"#  Rank\" lines", nccl_tests_program(r.kind)));
  if (runs.empty())
    throw std::invalid_argument("no \"# Collective test starting:\" line: not nccl-tests output");
  return runs;
}

std::vector<NcclTestsRun> read_nccl_tests(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::invalid_argument("cannot open the nccl-tests log");
  std::stringstream text;
  text << in.rdbuf();
  return parse_nccl_tests(text.str());
}

}  // namespace twin::hardware
