// Chrome-trace writer (the JSON Trace Event Format read by Perfetto and chrome://tracing): one
// process per rank, one thread per stream, complete events ("ph":"X") for tasks and a counter
// ("ph":"C") of SMs held by NCCL. Output order is the order of the calls: deterministic.
#pragma once

#include <cstdint>
#include <string>

namespace twin::reports {

class ChromeTrace {
 public:
  void process(int pid, const std::string& name);
  void thread(int pid, int tid, const std::string& name);
  void complete(int pid, int tid, const char* name, const char* cat, std::int64_t begin_ns,
                std::int64_t end_ns, std::int32_t layer);
  void counter(int pid, const char* name, std::int64_t t_ns, double value);
  std::string str() const { return "{\"traceEvents\":[\n" + body_ + "\n]}\n"; }

 private:
  void sep();
  std::string body_;
};

}  // namespace twin::reports
