// Tier 3: the charts of `twin report` — a sweep's rows read back and drawn, a run's charts
// against the run's own figures.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "scenarios/commands.hpp"
#include "scenarios/report_charts.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {
const fs::path kRoot = TWIN_SOURCE_DIR;
}  // namespace

TEST_SUITE("scenarios.report") {
  TEST_CASE("a sweep's CSV reads back as its rows; the heatmap marks points that cannot run") {
    const fs::path f =
        fs::temp_directory_path() / ("twin-report-" + std::to_string(::getpid()) + ".csv");
    std::ofstream(f)
        << "nccl.max_ctas,training.seq_len,tokens_per_s_per_gpu,alloc_retries,"
           "hbm_peak_reserved_GiB,oom,fits,error,certain_oom\n"
           "16,32768,751.8,0,80.5,false,true,,\n"
           "8,65536,,3,94.1,true,false,\"out of HBM, 95 GiB\",\n"
           // a point `twin sweep --skip-oom` did not simulate, as its CSV writes it
           "8,98304,,,,true,false,,\"{\"\"live_GiB\"\":120.5,\"\"capacity_GiB\"\":94.5}\"\n"
           "16,65536,,7,94.2,true,false,,\n"  // simulated out of HBM
           "16,98304,,,,,,bad ep,\n";         // could not run: no figures at all
    const Json rows = read_sweep_rows(f.string());
    REQUIRE(rows.size() == 5);
    CHECK(rows[0]["nccl.max_ctas"] == "16");  // grid values stay text, as twin sweep writes them
    CHECK(rows[0]["tokens_per_s_per_gpu"] == 751.8);
    CHECK(rows[1]["error"] == "out of HBM, 95 GiB");  // a quoted comma
    const auto chart = sweep_chart(rows, f.string());
    const auto& values = chart.spec["data"]["values"];
    CHECK(values[0]["label"] == "752");
    CHECK(values[0]["why"] == "");
    CHECK(values[1]["label"] == "OOM");
    CHECK(values[1]["why"] == "out of HBM, 95 GiB");
    CHECK(values[2]["label"] == "OOM");
    CHECK(values[2]["why"] ==
          "out of HBM in every schedule (not simulated): 120.50 GiB live at once, more than the "
          "allocator's 94.50 GiB");
    CHECK(values[3]["label"] == "OOM");
    CHECK(values[3]["why"] == "out of HBM after 7 allocator retries (peak reserved 94.20 GiB)");
    CHECK(values[4]["label"] == "×");  // empty oom and fits cells: no crash (they read as text)
    CHECK(values[4]["why"] == "bad ep");
    CHECK(values[0]["xn"] == 16.0);  // ordered as numbers, not as text
    // Every label carries the tooltip: a point without a figure draws no rect to hover.
    for (const auto& layer : chart.spec["layer"]) CHECK(layer["encoding"].contains("tooltip"));
    std::ofstream(f) << "a,b\n1,2,3\n";
    CHECK_THROWS_WITH_AS(read_sweep_rows(f.string()),
                         doctest::Contains("line 2: 3 cells, the header has 2"), InputError);
    std::ofstream(f) << "tokens_per_s_per_gpu\n5\n";
    CHECK_THROWS_AS(sweep_chart(read_sweep_rows(f.string()), f.string()),
                    InputError);  // no grid key
    fs::remove(f);
  }
  TEST_CASE("the run's charts carry its numbers") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    RunOptions o = args.run_options();
    o.trace = true;
    o.trace_ranks = {0};
    const auto r = simulate(load_scenario(args.scenario, args.load_options()), o);
    const auto b = breakdown_chart(r.report).spec["data"]["values"];
    double sum = 0;
    for (const auto& v : b)
      if (v["rank"] == "rank 0") sum += v["seconds"].get<double>();
    CHECK(sum == doctest::Approx(r.json["step_time_s"].get<double>()).epsilon(1e-6));
    const auto t = timeline_chart(Json::parse(r.trace)).spec["data"]["values"];
    CHECK(t.size() > 50);
    CHECK(t[0]["rank"] == "rank 0");
    const auto trace = Json::parse(r.trace);
    const auto& rank0 = r.json["memory"]["rank0"];
    for (const bool reserved : {false, true}) {
      CAPTURE(reserved);
      const auto h = hbm_pools_chart(trace, reserved).spec["data"]["values"];
      REQUIRE(!h.empty());
      CHECK(h.back()["pool"].is_string());
      double when = 0, total = 0, peak = 0;  // over the step, in time order
      std::map<std::pair<double, std::string>, int>
          samples;  // (time, pool): one each, else they stack
      for (const auto& v : h) {
        if (v["t_s"].get<double>() > when) total = 0;
        CHECK(v["t_s"].get<double>() >= when);
        when = v["t_s"];
        CHECK(++samples[{when, v["pool"].get<std::string>()}] == 1);
        peak = std::max(peak, total += v["GiB"].get<double>());
      }
      CHECK(when <= r.json["step_time_s"].get<double>());
      // The stacked pools reach the replay's peak (samples thinned to ~2,000 may miss it a little).
      const double want =
          rank0[reserved ? "peak_reserved_GiB" : "peak_allocated_GiB"].get<double>();
      CHECK(peak <= want + 1e-9);
      CHECK(peak >= 0.95 * want);
    }
  }
}
