#include "calibrate/nccl_tests_io.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "hardware/nccl_tests.hpp"

namespace twin::calibrate {

namespace {

using hardware::CollKind;

CollKind kind_named(const std::string& name) {
  if (const auto k = hardware::coll_kind_named(name)) return *k;
  throw std::runtime_error(
      fmt::format("measurements.nccl: collective \"{}\": expected all_gather, reduce_scatter, "
                  "all_reduce or all_to_all",
                  name));
}

}  // namespace

std::map<std::string, std::string> nccl_tests_logs(const Json& nccl, const std::string& device) {
  const int gpus = nccl.at("gpus").get<int>();
  std::map<std::string, std::map<int, hardware::NcclTestsRun>>
      logs;  // file → CTA setting → run, ordered
  for (const auto& r : nccl.at("results")) {
    const auto kind = kind_named(r.at("collective").get<std::string>());
    const int ctas = r.at("max_ctas").get<int>();
    auto& run = logs[fmt::format("{}.txt", hardware::nccl_tests_program(kind))][ctas];
    run.kind = kind, run.ranks = gpus, run.device = device, run.max_ctas = ctas;
    run.rows.push_back(hardware::nccl_tests_row(kind, gpus, r.at("bytes").get<double>(),
                                                r.at("median_ms").get<double>() * 1e-3));
  }
  std::map<std::string, std::string> out;
  for (const auto& [file, runs] : logs)
    for (const auto& [ctas, run] : runs)
      out[file] += format_nccl_tests(
          run,
          "twin-calibrate's measurement in nccl-tests' columns (one process drives "
          "all GPUs; the median of its repetitions)");
  return out;
}

Json import_nccl_tests(const std::vector<std::string>& files, int max_ctas) {
  Json results = Json::array(), sources = Json::array();
  int gpus = 0;
  for (const auto& f : files) {
    std::vector<hardware::NcclTestsRun> runs;
    try {
      runs = hardware::read_nccl_tests(f);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(f + ": " + e.what());
    }
    for (const auto& run : runs) {
      if (gpus != 0 && run.ranks != gpus)
        throw std::runtime_error(
            fmt::format("{}: {} ranks where the logs before had {}", f, run.ranks, gpus));
      gpus = run.ranks;
      for (const auto& r : run.rows)
        results.push_back({{"collective", sim::name_of(run.kind, hardware::kCollKindNames)},
                           {"max_ctas", run.max_ctas > 0 ? run.max_ctas : max_ctas},
                           {"bytes", r.size_B},
                           {"median_ms", r.time_us * 1e-3},
                           {"busbw_GBps", r.busbw_GBps}});
    }
    sources.push_back(f.substr(f.find_last_of('/') + 1));
  }
  return {{"gpus", gpus}, {"results", results}, {"source", {{"nccl_tests_logs", sources}}}};
}

}  // namespace twin::calibrate
