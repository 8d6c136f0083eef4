#include "reports/trace.hpp"

#include <fmt/format.h>

namespace twin::reports {

namespace {
// Microseconds with nanosecond resolution, as the format expects.
std::string us(std::int64_t ns) {
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}
}  // namespace

void ChromeTrace::sep() {
  if (!body_.empty()) body_ += ",\n";
}

void ChromeTrace::process(int pid, const std::string& name) {
  sep();
  body_ += fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"{}"}}}})", pid,
                       name);
}

void ChromeTrace::thread(int pid, int tid, const std::string& name) {
  sep();
  body_ +=
      fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"{}"}}}})",
                  pid, tid, name);
}

void ChromeTrace::complete(int pid, int tid, const char* name, const char* cat,
                           std::int64_t begin_ns, std::int64_t end_ns, std::int32_t layer) {
  sep();
  body_ += fmt::format(
      R"({{"ph":"X","pid":{},"tid":{},"name":"{}","cat":"{}","ts":{},"dur":{},"args":{{"layer":{}}}}})",
      pid, tid, name, cat, us(begin_ns), us(end_ns - begin_ns), layer);
}

void ChromeTrace::complete(int pid, int tid, const char* name, const char* cat,
                           std::int64_t begin_ns, std::int64_t end_ns,
                           const std::string& args_json) {
  sep();
  body_ += fmt::format(
      R"({{"ph":"X","pid":{},"tid":{},"name":"{}","cat":"{}","ts":{},"dur":{},"args":{}}})", pid,
      tid, name, cat, us(begin_ns), us(end_ns - begin_ns), args_json);
}

void ChromeTrace::flow(std::uint64_t id, int pid, int tid, std::int64_t from_ns, int pid2, int tid2,
                       std::int64_t to_ns, const char* name) {
  sep();
  body_ += fmt::format(
      R"({{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"name":"{}","cat":"{}"}},)"
      "\n"
      R"({{"ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{},"name":"{}","cat":"{}"}})",
      id, pid, tid, us(from_ns), name, name, id, pid2, tid2, us(to_ns), name, name);
}

void ChromeTrace::instant(int pid, int tid, const char* name, std::int64_t t_ns) {
  sep();
  body_ += fmt::format(R"({{"ph":"i","s":"t","pid":{},"tid":{},"name":"{}","ts":{}}})", pid, tid,
                       name, us(t_ns));
}

void ChromeTrace::counter(int pid, const char* name, std::int64_t t_ns,
                          const std::vector<std::pair<std::string, double>>& series) {
  sep();
  body_ += fmt::format(R"({{"ph":"C","pid":{},"name":"{}","ts":{},"args":{{)", pid, name, us(t_ns));
  for (std::size_t i = 0; i < series.size(); ++i)
    body_ += fmt::format(R"({}"{}":{})", i ? "," : "", series[i].first, series[i].second);
  body_ += "}}";
}

}  // namespace twin::reports
