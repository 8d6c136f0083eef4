// Tier 2: the strict loader — every kind of bad input names its file and JSON path.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "scenarios/json_tree.hpp"
#include "scenarios/loader.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = TWIN_SOURCE_DIR;

LoadOptions opts(std::vector<std::string> sets = {}) {
  return {kRoot, std::move(sets)};
}

// A scratch folder with a scenario based on the shipped europa.json.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("twin-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return dir / name;
  }
  fs::path based(const std::string& name, const std::string& body) const {
    return write(name, R"({"base": ")" + (kRoot / "scenarios/europa.json").string() + "\"" +
                           (body.empty() ? "" : ", " + body) + "}");
  }
};

std::string error_of(const fs::path& f, const LoadOptions& o) {
  try {
    load_scenario(f, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("scenarios.loader") {
  TEST_CASE("the shipped scenario loads with every key resolved") {
    const auto l = load_scenario(kRoot / "scenarios/europa.json", opts());
    CHECK(l.scenario.job.model.layers == 74);
    CHECK(l.scenario.hw.gpu.sm_count == 132);
    CHECK(l.scenario.hw.sources.at("gpu.sm_count").find("[spec]") == 0);
    CHECK(l.scenario.nccl.max_ctas == 16);
    CHECK(l.resolved["model"]["preset"] == "europa-1t");
    CHECK(l.resolved["hardware"]["gpu"]["sm_count"]["value"] == 132);
  }
  TEST_CASE("--set overrides with the documented keys") {
    const auto l = load_scenario(kRoot / "scenarios/europa.json",
                                 opts({"training.seq_len=32768", "nccl.max_ctas=8", "parallel.dp=2",
                                       "hardware.gpu.sm_count=100"}));
    CHECK(l.scenario.job.training.seq_len == 32768);
    CHECK(l.scenario.nccl.max_ctas == 8);
    CHECK(l.scenario.job.parallel.dp == 2);
    CHECK(l.scenario.hw.gpu.sm_count == 100);
    CHECK(l.scenario.hw.sources.at("gpu.sm_count") == "--set on the command line");
  }
  TEST_CASE("--set can switch the hardware profile") {
    const auto l = load_scenario(kRoot / "scenarios/europa.json", opts({"hardware.profile=h200"}));
    CHECK(l.scenario.hw.name == "h200");
    CHECK(l.scenario.hw.node.gpus == 8);
  }
  TEST_CASE("the elementwise a_sat follow the profile's HBM bandwidth, --set included") {
    // contention.hpp, mechanism 3: a_sat × gpu.hbm_bw_GBps / contention.sat_hbm_GBps.
    const auto europa = kRoot / "scenarios/europa.json";
    CHECK(load_scenario(europa, opts()).scenario.hw.contention.hbm_scale ==
          doctest::Approx(3250.0 / 4200));
    CHECK(load_scenario(europa, opts({"hardware.profile=h200"})).scenario.hw.contention.hbm_scale ==
          doctest::Approx(1.0));
    CHECK(load_scenario(europa, opts({"hardware.profile=h100-sxm"}))
              .scenario.hw.contention.hbm_scale == doctest::Approx(2916.0 / 4200));
    CHECK(load_scenario(europa, opts({"hardware.profile=h200", "hardware.gpu.hbm_bw_GBps=2100"}))
              .scenario.hw.contention.hbm_scale == doctest::Approx(0.5));
  }
  TEST_CASE("a base scenario's values are overridden by its child") {
    Scratch s;
    const auto f = s.based("child.json", R"("name": "child", "training": {"seq_len": 8192})");
    const auto l = load_scenario(f, opts());
    CHECK(l.scenario.name == "child");
    CHECK(l.scenario.job.training.seq_len == 8192);
    CHECK(l.scenario.job.training.optimizer == twin::model::Optimizer::muon);
  }
  TEST_CASE("bad inputs name the file and JSON path") {
    Scratch s;
    const auto europa = (kRoot / "scenarios/europa.json").string();
    struct Case {
      std::string body, file_hint, expect;
    };
    const std::vector<Case> cases = {
        {R"("training": {"seq_lenx": 5})", "bad.json",
         "$.training.seq_lenx: unknown key (did you mean training.seq_len?)"},
        {R"("training": {"seq_len": "long"})", "bad.json",
         "$.training.seq_len: expected an integer"},
        {R"("training": {"seq_len": -5})", "bad.json", "$.training.seq_len: -5 is out of range"},
        {R"("training": {"offload_fraction": 1.5})", "bad.json",
         "$.training.offload_fraction: 1.5 is out of range"},
        {R"("training": {"optimizer": "sgd"})", "bad.json", "is not one of: adamw, muon"},
        {R"("model": {"experts": 382})", "bad.json",
         "$.model.experts: experts (382) must be divisible by ep (4)"},
        {R"("parallel": {"replica_gpus": 6})", "bad.json",
         "$.parallel.replica_gpus: 6 GPUs cannot be tiled"},
        {R"("parallel": {"dp": 100})", "bad.json", "$.parallel.dp: the job needs 9600 nodes"},
        {R"("model": {"attention": {"pattern": "SXF"}})", "bad.json", "$.model.attention.pattern"},
        {R"("hardware": {"gpu": {"sm_count": 100}})", "bad.json",
         "$.hardware.gpu.sm_count: expected {\"value\""},
        {R"("nccl": 5)", "bad.json", "$.nccl: expected an object"},
        {R"("data": {"doc_lengths_file": "nope.txt"})", "bad.json",
         "$.data.doc_lengths_file: cannot open"},
        // A list of numbers (the measured cluster tables).
        {R"("hardware": {"contention": {"clusters": {"held_sms": {"value": 4, "source": "x"}}}})",
         "bad.json", "$.hardware.contention.clusters.held_sms: expected a list of numbers, got 4"},
        {R"("hardware": {"contention": {"clusters": {"held_sms": {"value": [0, "a"], "source": "x"}}}})",
         "bad.json", "expected a list of numbers"},
        {R"("hardware": {"contention": {"clusters": {"c2_usable_sms": {"value": [132, -1], "source": "x"}}}})",
         "bad.json", "$.hardware.contention.clusters.c2_usable_sms: -1 is out of range"},
        {R"("hardware": {"contention": {"clusters": {"held_sms": {"value": [0, 8], "source": "x"}}}})",
         "bad.json",
         "$.hardware.contention.clusters.held_sms: every cluster_usable_sms table needs one value "
         "per"},
        {R"("hardware": {"contention": {"clusters": {"held_sms": {"value": [2, 8], "source": "x"}}}})",
         "bad.json", "cluster_held_sms must start at 0"},
        // The lone CTA's kernel table: parallel lists, one value per kernel in each.
        {R"("hardware": {"contention": {"lone_cta_tiles": {"tile_m": {"value": [64], "source": "x"}}}})",
         "bad.json",
         "$.hardware.contention.lone_cta_tiles.tile_m: lone_cta_tiles.tile_m, tile_n, cluster_m, "
         "cluster_n, setup_us and per_k_ns need one value per kernel each"},
        // The power cap's controller (hardware/power.hpp): on, it needs its time constants.
        {R"("hardware": {"power": {"step_s": {"value": 0.00025, "source": "x"}}})", "bad.json",
         "$.hardware.power.filter_s: must be > 0 when power.step_s is set"},
        {R"("hardware": {"power": {"gain_down_per_s": {"value": -1, "source": "x"}}})", "bad.json",
         "$.hardware.power.gain_down_per_s: -1 is out of range"},
        // A power limit the controller can hold must be above an idle GPU's draw.
        {R"("hardware": {"profile": "h200", "gpu": {"power_limit_W": {"value": 50, "source": "x"}}})",
         "bad.json",
         "$.hardware.gpu.power_limit_W: 50 W is not above an idle GPU's draw (power.idle_W 82 W)"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.body);
      const auto f = s.based("bad.json", c.body);
      const auto err = error_of(f, opts());
      CHECK(err.find(c.expect) != std::string::npos);
      CHECK(err.find(c.file_hint) != std::string::npos);
    }
  }
  TEST_CASE("a missing key with no default names the key; blame falls on the file") {
    Scratch s;
    const auto f = s.write("m.json", R"({"name": "m", "model": {"preset": "europa-1t"},
        "hardware": {"profile": "jupiter-gh200"}, "parallel": {"ep": 4}})");
    const auto err = error_of(f, opts());
    CHECK(err.find("m.json: $.parallel.replica_gpus: missing key") != std::string::npos);
  }
  TEST_CASE("a value that came from a preset is blamed on the preset file") {
    Scratch s;
    const auto model = s.write("model.json", R"({"name":"x"})");
    const auto f = s.write("p.json", R"({"name": "p", "model": {"preset": "model.json"},
        "hardware": {"profile": "jupiter-gh200"}, "parallel": {"replica_gpus": 384}})");
    const auto err = error_of(f, opts());
    CHECK(err.find("model.json: $.model.layers: missing key") != std::string::npos);
  }
  TEST_CASE("syntax errors, missing files, cycles, bad --set") {
    Scratch s;
    CHECK(error_of(s.write("syntax.json", "{\n  \"name\": ,\n}"), opts())
              .find("syntax.json: invalid JSON at line 2 column") != std::string::npos);
    CHECK(error_of(s.dir / "absent.json", opts()).find("absent.json: cannot open") !=
          std::string::npos);
    s.write("a.json", R"({"base": "b.json"})");
    s.write("b.json", R"({"base": "a.json"})");
    CHECK(
        error_of(s.dir / "a.json", opts()).find("base-scenario cycle: a.json → b.json → a.json") !=
        std::string::npos);
    const auto europa = kRoot / "scenarios/europa.json";
    CHECK(error_of(europa, opts({"training.seqlen=5"}))
              .find("--set: $.training.seqlen: no such parameter") != std::string::npos);
    CHECK(error_of(europa, opts({"training.seq_len"})).find("expected KEY=VALUE") !=
          std::string::npos);
    CHECK(error_of(europa, opts({"training.seq_len=abc"}))
              .find("--set: $.training.seq_len: expected an integer") != std::string::npos);
    CHECK(error_of(europa, opts({"hardware.profile=nope"})).find("no hardware named \"nope\"") !=
          std::string::npos);
    CHECK(error_of(s.write("dev.json", R"({"base": "/dev/zero"})"), opts())
              .find("not a regular file") != std::string::npos);
    CHECK(error_of(s.write("deep.json", std::string(100, '[') + std::string(100, ']')), opts())
              .find("nested deeper than 64 levels") != std::string::npos);
  }
  TEST_CASE(
      "hostile JSON is refused before parsing: duplicate keys, huge objects, long keys, bad "
      "UTF-8") {
    // Issue #23 items 3 and 10: the order-keeping parser is quadratic in an object's keys (80k keys
    // took 35 s), a 1 MB key took 4 s in the did-you-mean, duplicates were silently merged, deep
    // --set values crashed the recursive walks, non-UTF-8 --set values were an internal error.
    Scratch s;
    CHECK(error_of(s.write("empty.json", R"({"training": {"": 1}})"), opts())
              .find("empty.json: an empty key in training") != std::string::npos);
    CHECK(
        error_of(s.write("dup.json", R"({"training": {"seq_len": 4096, "seq_len": 8192}})"), opts())
            .find("dup.json: duplicate key training.seq_len") != std::string::npos);
    std::string many = "{";
    for (int i = 0; i < 80000; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": 1";
    many += "}";
    CHECK(error_of(s.write("many.json", many), opts()).find("an object with more than 4096 keys") !=
          std::string::npos);
    CHECK(error_of(s.write("long.json", "{\"" + std::string(1 << 20, 'k') + "\": 1}"), opts())
              .find("a key longer than 256 bytes") != std::string::npos);
    CHECK(error_of(s.write("utf.json", "{\"name\": \"\xff\xfe\"}"), opts())
              .find("utf.json: invalid JSON at line 1") != std::string::npos);
    const auto europa = kRoot / "scenarios/europa.json";
    CHECK(error_of(europa, opts({"name=\xff"})).find("--set: a --set that is not UTF-8") !=
          std::string::npos);
    // Overlong forms and surrogates too: the JSON writer would throw on them.
    CHECK(error_of(europa, opts({"name=\xc0\x80"})).find("not UTF-8") != std::string::npos);
    CHECK(error_of(europa, opts({"name=\xed\xa0\x80"})).find("not UTF-8") != std::string::npos);
    CHECK(valid_utf8("J\xc3\xbclich \xe2\x86\x92 \xf0\x9f\x9a\x80"));
    CHECK(error_of(europa, opts({"name=" + std::string(100000, '[')}))
              .find("--set: $.name: nested deeper than 64 levels") != std::string::npos);
    CHECK(error_of(europa, opts({std::string(1 << 20, 'k') + "=1"})).find("no such parameter") !=
          std::string::npos);
  }
  TEST_CASE("regressions found by fuzzing (tests/data/fuzz/) end in an input error") {
    for (const auto& e : fs::directory_iterator(kRoot / "tests/data/fuzz")) {
      CAPTURE(e.path().string());
      CHECK(error_of(e.path(), opts()).find(e.path().filename().string()) != std::string::npos);
    }
    CHECK(error_of(kRoot / "tests/data/fuzz/crash-number-overflow.json", opts())
              .find("number overflow") != std::string::npos);
  }
  TEST_CASE("a Slurm node list is read, and a bad or short one is reported") {
    Scratch s;
    s.write("nodes.txt", "jpbo-[000-001]-[01-48]\n");
    const auto ok =
        s.based("ok.json", R"("placement": {"policy": "file", "node_list_file": "nodes.txt"})");
    CHECK(load_scenario(ok, opts()).scenario.placement.node_names.size() == 96);
    s.write("short.txt", "jpbo-000-[01-48]\n");
    const auto sh =
        s.based("short.json", R"("placement": {"policy": "file", "node_list_file": "short.txt"})");
    CHECK(error_of(sh, opts()).find("short.txt: the node list has 48 nodes; the job needs 96") !=
          std::string::npos);
    s.write("bad.txt", "jpbo-[000-001\n");
    const auto bad =
        s.based("bad.json", R"("placement": {"policy": "file", "node_list_file": "bad.txt"})");
    CHECK(error_of(bad, opts()).find("bad.txt: unbalanced '['") != std::string::npos);
    const auto none = s.based("none.json", R"("placement": {"policy": "file"})");
    CHECK(error_of(none, opts()).find("needs a node list file") != std::string::npos);
  }
  TEST_CASE("a document-length file is read, and bad lines are reported") {
    Scratch s;
    s.write("lens.txt", "100 200\n300\n");
    const auto ok = s.based("ok.json", R"("data": {"doc_lengths_file": "lens.txt"})");
    CHECK(load_scenario(ok, opts()).scenario.job.data.doc_lengths ==
          std::vector<std::int64_t>{100, 200, 300});
    s.write("bad.txt", "100\n20x\n");
    const auto bad = s.based("bad.json", R"("data": {"doc_lengths_file": "bad.txt"})");
    CHECK(error_of(bad, opts()).find("bad.txt: line 2: \"20x\" is not a positive token count") !=
          std::string::npos);
  }
}
