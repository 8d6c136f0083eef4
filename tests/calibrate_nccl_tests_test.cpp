// twin-calibrate's collective measurements and nccl-tests logs, both ways (issue #20, item 4): the
// committed logs are what the converter writes from the 4-H200 measurement, and importing them
// gives its tables back.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "calibrate/nccl_tests_io.hpp"

using namespace twin;
namespace fs = std::filesystem;

namespace {
const fs::path kRoot(TWIN_SOURCE_DIR);
const fs::path kLogs = kRoot / "reports/calibration/nccl-tests";

calibrate::Json measured_x4() {
  std::ifstream in(kRoot / "reports/calibration/h200x4-2026-11-29-nccl.json");
  return calibrate::Json::parse(in)["measurements"]["nccl"];
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_SUITE("calibrate.nccl_tests") {
  TEST_CASE("the committed nccl-tests logs are the 4-H200 measurement in nccl-tests' columns") {
    const auto logs = calibrate::nccl_tests_logs(measured_x4(), "NVIDIA H200");
    REQUIRE(logs.size() == 4);  // one per collective, a test per NCCL_MAX_CTAS
    for (const auto& [file, text] : logs) {
      CAPTURE(file);
      CHECK(text == text_of(kLogs / file));
    }
  }

  TEST_CASE("importing the logs gives the measurement's tables back") {
    std::vector<std::string> files;
    for (const char* f : {"all_gather_perf.txt", "reduce_scatter_perf.txt", "all_reduce_perf.txt",
                          "alltoall_perf.txt"})
      files.push_back((kLogs / f).string());
    const auto back = calibrate::import_nccl_tests(files, 0);
    const auto orig = measured_x4();
    CHECK(back["gpus"] == 4);
    REQUIRE(back["results"].size() == orig["results"].size());
    std::map<std::tuple<std::string, int, double>, const calibrate::Json*> by;
    for (const auto& r : orig["results"]) by[{r["collective"], r["max_ctas"], r["bytes"]}] = &r;
    for (const auto& r : back["results"]) {
      const auto it = by.find({r["collective"], r["max_ctas"], r["bytes"]});
      REQUIRE(it != by.end());
      CHECK(r["median_ms"].get<double>() ==
            doctest::Approx((*it->second)["median_ms"].get<double>()).epsilon(1e-3));
      CHECK(r["busbw_GBps"].get<double>() ==
            doctest::Approx((*it->second)["busbw_GBps"].get<double>()).epsilon(2e-3));
    }
    CHECK_THROWS_WITH_AS(calibrate::import_nccl_tests({(kLogs / "missing.txt").string()}, 0),
                         doctest::Contains("missing.txt: cannot open the nccl-tests log"),
                         std::runtime_error);
  }
}
