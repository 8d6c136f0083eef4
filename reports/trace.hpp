// Chrome-trace writer (the JSON Trace Event Format read by Perfetto and chrome://tracing): one
// process per rank, one thread per stream, complete events ("ph":"X") for tasks and a counter
// ("ph":"C") of SMs held by NCCL. Output order is the order of the calls: deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace twin::reports {

class ChromeTrace {
 public:
  void process(int pid, const std::string& name);
  void thread(int pid, int tid, const std::string& name);
  void complete(int pid, int tid, const char* name, const char* cat, std::int64_t begin_ns,
                std::int64_t end_ns, std::int32_t layer);
  void counter(int pid, const char* name, std::int64_t t_ns, double value);
  // A JSON object written as the trace's "otherData" (which twin made it: version, commit,
  // scenario hash).
  void metadata(std::string json_object) { meta_ = std::move(json_object); }
  std::string str() const {
    return "{" + (meta_.empty() ? "" : "\"otherData\":" + meta_ + ",\n") + "\"traceEvents\":[\n" + body_ + "\n]}\n";
  }

 private:
  void sep();
  std::string body_, meta_;
};

}  // namespace twin::reports
