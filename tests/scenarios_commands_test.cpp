// Tier 3: the commands around the step — sweeps (grid, input errors, resume, tune), outputs (atomic
// writes, temporaries on signals) and the CLI's parameter table.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"
#include "sim/engine.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {
const fs::path kRoot = TWIN_SOURCE_DIR;
}  // namespace

TEST_SUITE("scenarios.sweep") {
  TEST_CASE(
      "tune: the configurations that fit, best first, explained; those that cannot run counted by "
      "reason") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    TuneArgs t;
    t.vary = {"nccl.max_ctas=8,16,32", "training.seq_len=2048,4096,-1"};
    t.top = 4;
    const Json one = tune_json(args, t);
    t.jobs = 2;
    CHECK(tune_json(args, t).dump() == one.dump());  // the same answer with more threads
    CHECK(one["configurations"] == 9);
    CHECK(one["ranked"] == 6);
    REQUIRE(one["skipped"].size() == 1);
    CHECK(one["skipped"].begin().key().find("cannot run: ") == 0);
    CHECK(one["skipped"].begin().value() == 3);
    const auto& top = one["top"];
    REQUIRE(top.size() == 4);
    for (std::size_t i = 1; i < top.size(); ++i)
      CHECK(top[i - 1]["tokens_per_s_per_gpu"].get<double>() >=
            top[i]["tokens_per_s_per_gpu"].get<double>());
    // The explanation is the step's difference from the baseline, part by part.
    for (const auto& c : top) {
      double parts = 0;
      for (const auto& [k, v] : c["why"]["breakdown_s"].items()) parts += v.get<double>();
      CHECK(parts == doctest::Approx(c["why"]["step_time_s"].get<double>()).epsilon(1e-6));
    }
    // The baseline (nccl.max_ctas 16, seq_len 4096: the scenario as given) is among them, at ×1.
    bool found = false;
    for (const auto& c : top)
      found = found ||
              (c["values"]["nccl.max_ctas"] == "16" && c["values"]["training.seq_len"] == "4096" &&
               c["relative_to_baseline"].get<double>() == doctest::Approx(1.0));
    CHECK(found);
    t.objective = "tokens";
    CHECK_THROWS_AS(tune_json(args, t), InputError);
    t.budget_points = 2;  // fewer than the first axis's values: nothing could be searched
    t.objective = "tokens_per_s_per_gpu";
    CHECK_THROWS_WITH_AS(tune_json(args, t), doctest::Contains("nothing searched"), InputError);
  }

  // A configuration out of HBM whatever its timing (model/memory_bound.hpp) is not simulated:
  // tune counts it as before and ranks the others exactly as over the full sweep's rows.
  TEST_CASE("tune: configurations out of HBM in every schedule are not timed; the same answer") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    args.sets = {"hardware.gpu.hbm_usable_GiB=1.3"};  // an allocator of ~0.2 GiB
    TuneArgs t;
    t.vary = {"training.seq_len=2048,4096,8192",
              "training.activation_checkpointing=selective,full"};
    t.top = 3;
    const Json tuned = tune_json(args, t);
    SweepArgs sw;
    sw.grid = t.vary;
    const Json rows = sweep_json(args, sw);  // every point simulated
    std::vector<double> fit;
    int oom = 0;
    for (const auto& r : rows) {
      oom += r["oom"].get<bool>() ? 1 : 0;
      if (r["fits"].get<bool>()) fit.push_back(r["tokens_per_s_per_gpu"]);
    }
    std::sort(fit.rbegin(), fit.rend());
    CHECK(tuned["skipped"]["out of HBM"] == oom);
    CHECK(tuned["oom_before_simulating"].get<int>() >= 1);
    CHECK(tuned["oom_before_simulating"].get<int>() < oom);  // the replay finds the others
    REQUIRE(tuned["top"].size() == std::min<std::size_t>(3, fit.size()));
    for (std::size_t i = 0; i < tuned["top"].size(); ++i)
      CHECK(tuned["top"][i]["tokens_per_s_per_gpu"].get<double>() == fit[i]);
    // Point by point: one not simulated is out of HBM when simulated too; the others are the
    // same rows.
    sw.skip_certain_oom = true;
    const Json quick = sweep_json(args, sw);
    REQUIRE(quick.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CAPTURE(i);
      if (!quick[i].contains("certain_oom")) {
        CHECK(quick[i].dump() == rows[i].dump());
        continue;
      }
      CHECK(rows[i]["oom"] == true);
      CHECK(quick[i]["oom"] == true);
      CHECK_FALSE(quick[i].contains("step_time_s"));
      CHECK(quick[i]["certain_oom"]["live_GiB"].get<double>() >
            quick[i]["certain_oom"]["capacity_GiB"].get<double>());
    }
    t.any = true;  // configurations that do not fit are ranked too: every one is timed
    CHECK(tune_json(args, t)["oom_before_simulating"] == 0);
  }

  // A space above --budget-points: one axis at a time from the scenario's own values, to a
  // configuration no single-axis change improves (checked against the exhaustive search's rows).
  TEST_CASE("tune: a space above the budget is searched by coordinates to a local optimum") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    TuneArgs t;
    t.vary = {"nccl.max_ctas=8,16,32,64", "training.offload_fraction=0.25,0.5,1.0",
              "training.moe_tile_scheduler=static,dynamic"};
    t.top = 1;
    const Json all = tune_json(args, t);  // 24 ≤ 1000: exhaustive
    CHECK(all["search"] == "exhaustive");
    t.budget_points = 12;
    const Json coord = tune_json(args, t);
    CHECK(coord["search"] == "coordinate");
    CHECK(coord["space_points"] == 24);
    CHECK(coord["configurations"].get<int>() <= 12);
    t.jobs = 2;
    CHECK(tune_json(args, t).dump() == coord.dump());  // deterministic, with any threads
    // The configuration it ends at: among the exhaustive rows, none that differs from it on
    // one axis only is better.
    const Json& best = coord["top"][0]["values"];
    const double v = coord["top"][0]["tokens_per_s_per_gpu"];
    SweepArgs sw;
    sw.grid = t.vary;
    for (const auto& row : sweep_json(args, sw)) {
      int differ = 0;
      for (const auto& [k, x] : best.items()) differ += row[k] != x;
      if (differ == 1 && row.value("fits", false)) CHECK(row["tokens_per_s_per_gpu"] <= v);
    }
    CHECK(v <= all["top"][0]["tokens_per_s_per_gpu"].get<double>());
  }

  TEST_CASE("sweep --shard I/N parts, merged in any order, give the unsharded sweep's bytes") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    args.progress = false;
    const auto dir = fs::temp_directory_path() / ("twin-shard-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    SweepArgs sw;
    sw.grid = {"nccl.max_ctas=8,16,32",
               "training.seq_len=2048,4096"};  // 6 points over 4 shards: one gets 1
    std::ostringstream ignored;
    for (const char* ext : {".csv", ".json"}) {
      sw.out = (dir / (std::string("full") + ext)).string();
      sw.shard = 0, sw.shards = 1;
      REQUIRE(cmd_sweep(args, sw, ignored) == 0);
    }
    MergeArgs m;
    for (int i = 3; i >= 0; --i) {  // parts in any order
      sw.shard = i, sw.shards = 4;
      sw.out = (dir / fmt::format("part-{}.json", i)).string();
      REQUIRE(cmd_sweep(args, sw, ignored) == 0);
      m.parts.push_back(sw.out);
    }
    auto read = [](const fs::path& f) {
      std::ifstream in(f, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    for (const char* ext : {".csv", ".json"}) {
      m.out = (dir / (std::string("merged") + ext)).string();
      REQUIRE(cmd_merge(m, ignored) == 0);
      CHECK(read(dir / (std::string("merged") + ext)) == read(dir / (std::string("full") + ext)));
    }
    // Nothing merged without every shard once, all of one sweep.
    m.out = (dir / "never.csv").string();
    auto refused = [&](std::vector<std::string> parts, const char* why) {
      m.parts = std::move(parts);
      CHECK_THROWS_WITH_AS(cmd_merge(m, ignored), doctest::Contains(why), InputError);
      CHECK_FALSE(fs::exists(m.out));
    };
    const auto part = [&](int i) { return (dir / fmt::format("part-{}.json", i)).string(); };
    refused({part(0), part(1), part(2)}, "shard 3/4 is missing");
    refused({part(0), part(1), part(1), part(2), part(3)}, "shard 1 is also");
    refused({(dir / "full.json").string()}, "expected a JSON object");  // a sweep, not a part
    sw.grid = {"nccl.max_ctas=8,16"};
    sw.shard = 1, sw.shards = 4;
    sw.out = (dir / "other.json").string();
    REQUIRE(cmd_sweep(args, sw, ignored) == 0);
    refused({part(0), sw.out, part(2), part(3)}, "not the sweep of");
    sw.grid = {"nccl.max_ctas=8,16,32", "training.seq_len=2048,4096"};
    sw.skip_certain_oom = true;  // rows that may lack metrics: not joined with parts that have them
    REQUIRE(cmd_sweep(args, sw, ignored) == 0);
    refused({part(0), sw.out, part(2), part(3)}, "not the sweep of");
    sw.skip_certain_oom = false;
    CHECK_THROWS_AS(parse_shard("4/4"), InputError);
    CHECK_THROWS_AS(parse_shard("1/x"), InputError);
    CHECK_THROWS_AS(parse_shard("-1/2"), InputError);
    CHECK(parse_shard("3/16") == std::pair{3, 16});
    sw.out.clear();
    CHECK_THROWS_WITH_AS(cmd_sweep(args, sw, ignored), doctest::Contains("needs --out"),
                         InputError);
    fs::remove_all(dir);
  }

  TEST_CASE("sweep: a grid gives one row per point, in order, the same with 1 or 2 threads") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    SweepArgs sw;
    sw.grid = {"nccl.max_ctas=8,16", "training.seq_len=2048,4096,-1"};
    sw.jobs = 1;
    const auto one = sweep_json(args, sw);
    sw.jobs = 2;
    const auto two = sweep_json(args, sw);
    REQUIRE(one.size() == 6);
    CHECK(one.dump() == two.dump());
    CHECK(one[0]["nccl.max_ctas"] == "8");
    CHECK(one[1]["training.seq_len"] == "4096");
    CHECK(one[2]["error"].get<std::string>().find("out of range") != std::string::npos);
    CHECK(one[0]["error"] == "");
    CHECK(to_csv(one).find("nccl.max_ctas,training.seq_len,tokens_per_s_per_gpu") == 0);
    // The first point fails: the header still names every column, every line has them all.
    sw.grid = {"training.seq_len=-1,2048"};
    sw.jobs = 1;
    const std::string csv = to_csv(sweep_json(args, sw));
    CHECK(csv.find("training.seq_len,tokens_per_s_per_gpu") == 0);
    std::istringstream lines(csv);
    std::vector<std::size_t> commas;
    for (std::string l; std::getline(lines, l);) {
      std::size_t n = 0;
      bool quoted = false;
      for (const char c : l) quoted ^= c == '"', n += !quoted && c == ',';
      commas.push_back(n);  // separators, not commas inside a quoted cell
    }
    REQUIRE(commas.size() == 3);
    CHECK(commas[1] == commas[0]);
    CHECK(commas[2] == commas[0]);
  }
  TEST_CASE("sweep: input errors fail the command, before any point runs") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    SweepArgs sw;
    sw.grid = {"nccl.max_ctas=8,16"};
    auto fails = [&](const CommonArgs& a, const SweepArgs& s) { CHECK_THROWS(sweep_json(a, s)); };
    CommonArgs missing = args;
    missing.scenario = (kRoot / "tests/data/no-such-scenario.json").string();
    fails(missing, sw);
    CommonArgs bad_set = args;
    bad_set.sets = {"training.seq_lenx=4"};
    fails(bad_set, sw);
    SweepArgs bad_key = sw;
    bad_key.grid = {"nccl.max_ctax=8,16"};
    fails(args, bad_key);
    SweepArgs not_utf8 = sw;  // found by fuzzing: a value that is not UTF-8 was an internal error
    not_utf8.grid = {"nccl.max_ctas=8,\xfe"};
    fails(args, not_utf8);
    CHECK_THROWS_AS(sweep_progress_header(args, not_utf8), InputError);
    CommonArgs budget = args;
    budget.max_events = 10;
    CHECK_THROWS_AS(sweep_json(budget, sw), twin::sim::EventLimitExceeded);
  }
  TEST_CASE("sweep: resumed from a progress file, the final rows equal an uninterrupted run's") {
    CommonArgs args;
    args.scenario = (kRoot / "tests/golden/small.json").string();
    args.data_dir = kRoot.string();
    SweepArgs sw;
    sw.grid = {"nccl.max_ctas=8,16,32"};
    const auto full = sweep_json(args, sw);
    const auto progress =
        fs::temp_directory_path() / ("twin-sweep-" + std::to_string(::getpid()) + ".partial");
    // An interrupted run: its header, two finished points, a torn line.
    const std::string header = sweep_progress_header(args, sw);
    {
      std::ofstream f(progress);
      f << header << "\n"
        << Json{{"i", 0}, {"row", full[0]}}.dump() << "\n"
        << Json{{"i", 2}, {"row", full[2]}}.dump() << "\n"
        << "{\"i\": 1, \"ro";
    }
    CHECK(sweep_json(args, sw, progress.string()).dump() == full.dump());
    // The finished points are taken, not recomputed: a marked row comes back as it was.
    {
      Json marked = full[1];
      marked["tokens_per_s_per_gpu"] = -1;
      std::ofstream f(progress);
      f << header << "\n" << Json{{"i", 1}, {"row", marked}}.dump() << "\n";
    }
    CHECK(sweep_json(args, sw, progress.string())[1]["tokens_per_s_per_gpu"] == -1);
    // A progress file of other arguments is not used: its (wrong) row is recomputed.
    {
      Json wrong = full[1];
      wrong["tokens_per_s_per_gpu"] = -1;
      std::ofstream f(progress);
      f << "{\"other\":1}\n" << Json{{"i", 1}, {"row", wrong}}.dump() << "\n";
    }
    CHECK(sweep_json(args, sw, progress.string()).dump() == full.dump());
    // Rows that are no point of the grid are ignored, not trusted or fatal (issue #23, item 7):
    // a non-numeric or out-of-range "i", a row that is not an object.
    {
      std::ofstream f(progress);
      Json other_point = full[2];  // a row of point 2 filed as point 1: not this point's
      other_point["tokens_per_s_per_gpu"] = -1;
      f << header << "\n"
        << R"({"i": "x", "row": {}})"
        << "\n"
        << R"({"i": 99, "row": {}})"
        << "\n"
        << R"({"i": 1, "row": 5})"
        << "\n"
        << Json{{"i", 1}, {"row", other_point}}.dump() << "\n";
    }
    CHECK(sweep_json(args, sw, progress.string()).dump() == full.dump());
    // The header changes with the scenario's content under the same arguments.
    {
      const auto copy =
          fs::temp_directory_path() / ("twin-sweep-" + std::to_string(::getpid()) + ".json");
      Json j = read_json_file(kRoot / "tests/golden/small.json");
      j["base"] = (kRoot / "scenarios/europa.json").string();
      std::ofstream(copy) << j.dump();
      CommonArgs a2 = args;
      a2.scenario = copy.string();
      const auto before = sweep_progress_header(a2, sw);
      j["training"]["seq_len"] = 8192;
      std::ofstream(copy) << j.dump();
      CHECK(sweep_progress_header(a2, sw) != before);
      fs::remove(copy);
    }
    // Through the command: the output is written and the progress file removed.
    sw.out = (fs::temp_directory_path() / ("twin-sweep-" + std::to_string(::getpid()) + ".json"))
                 .string();
    std::ostringstream sink;
    CHECK(cmd_sweep(args, sw, sink) == 0);
    CHECK(fs::file_size(sw.out) > 0);
    CHECK(!fs::exists(sw.out + ".partial"));
    fs::remove(sw.out);
    fs::remove(progress);
  }
}

TEST_SUITE("scenarios.outputs") {
  TEST_CASE("outputs: temporaries of dead writers are removed, a SIGTERM mid-write leaves none") {
    // Issue #23 item 7: SIGKILL between writing and renaming left FILE.tmp.PID behind.
    namespace fs = std::filesystem;
    const auto dir = fs::temp_directory_path() / ("twin-out-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto out = dir / "out.json";
    int dead = 999999;  // a PID no process has
    while (::kill(dead, 0) == 0 || errno != ESRCH) --dead;
    const auto stale = dir / ("out.json.tmp." + std::to_string(dead));
    const auto live = dir / ("out.json.tmp." + std::to_string(::getppid()));
    std::ofstream(stale) << "half";
    std::ofstream(live) << "another writer's";
    twin::reports::write_atomic(out, "{}\n");
    CHECK(fs::exists(out));
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));
    // A child writing 512 MiB is sent SIGTERM while it writes: no temporary is left.
    const pid_t child = ::fork();
    if (child == 0) {
      twin::reports::remove_temporaries_on_signals();
      twin::reports::write_atomic(dir / "big.json", std::string(512u << 20, 'x'));
      ::_exit(0);
    }
    const auto tmp = dir / ("big.json.tmp." + std::to_string(child));
    for (int i = 0; i < 2000 && !fs::exists(tmp); ++i) ::usleep(1000);
    ::kill(child, SIGTERM);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFSIGNALED(status))
      CHECK_FALSE(fs::exists(tmp));  // else it finished first: nothing to check
    fs::remove_all(dir);
  }
}

TEST_SUITE("scenarios.cli") {
  TEST_CASE("help-params: integer ranges written whole, JSON ranges as numbers (issue #19)") {
    std::ostringstream text, json;
    cmd_help_params(false, text);
    cmd_help_params(true, json);
    CHECK(text.str().find("[1, 16777216]") != std::string::npos);  // was [1, 1.67772e+07]
    CHECK(text.str().find("e+0") == std::string::npos);
    for (const auto& e : Json::parse(json.str()))
      if (e["key"] == "training.seq_len") CHECK(e["range"] == Json::array({1, 16777216}));
  }
}
