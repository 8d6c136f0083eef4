// Chrome-trace writer (the JSON Trace Event Format read by Perfetto and chrome://tracing): one
// process per rank, one thread per stream, complete events ("ph":"X") for tasks with their
// launches as args, flow events ("s"/"f") for dependencies across streams, instant events ("i")
// for phase ends, and counters ("ph":"C"): SMs held by NCCL, HBM allocated per pool. Output order
// is the order of the calls: deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace twin::reports {

class ChromeTrace {
 public:
  void process(int pid, const std::string& name);
  void thread(int pid, int tid, const std::string& name);
  void complete(int pid, int tid, const char* name, const char* cat, std::int64_t begin_ns,
                std::int64_t end_ns, std::int32_t layer);
  // The same with its args as a JSON object's text (layer, launches: shapes, bytes, CTAs).
  void complete(int pid, int tid, const char* name, const char* cat, std::int64_t begin_ns,
                std::int64_t end_ns, const std::string& args_json);
  // A dependency drawn as an arrow from (pid, tid, from_ns) to (pid2, tid2, to_ns).
  void flow(std::uint64_t id, int pid, int tid, std::int64_t from_ns, int pid2, int tid2,
            std::int64_t to_ns, const char* name = "dependency");
  // A moment on a track (a phase's end).
  void instant(int pid, int tid, const char* name, std::int64_t t_ns);
  // A counter track's sample: one value per series (Perfetto stacks the series of a track).
  void counter(int pid, const char* name, std::int64_t t_ns,
               const std::vector<std::pair<std::string, double>>& series);
  // A JSON object written as the trace's "otherData" (which twin made it: version, commit,
  // scenario hash).
  void metadata(std::string json_object) { meta_ = std::move(json_object); }
  std::string str() const {
    return "{" + (meta_.empty() ? "" : "\"otherData\":" + meta_ + ",\n") + "\"traceEvents\":[\n" +
           body_ + "\n]}\n";
  }

 private:
  void sep();
  std::string body_, meta_;
};

}  // namespace twin::reports
