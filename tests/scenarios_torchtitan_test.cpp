// Issue #22: TorchTitan job files as scenarios (scenarios/torchtitan_import.hpp) and the dense
// step with tensor parallelism, compile and Float8 (closed forms next to each check).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "hardware/cluster.hpp"
#include "model/step_graph.hpp"
#include "scenarios/simulate.hpp"
#include "scenarios/torchtitan_import.hpp"
#include "sim/engine.hpp"

using namespace twin;

namespace {
const std::filesystem::path kRoot = TWIN_SOURCE_DIR;

std::string job_file(const char* name) {
  return (kRoot / "tests/data/torchtitan" / name).string();
}

scenarios::Loaded llama8b(std::vector<std::string> sets) {
  return scenarios::load_scenario(kRoot / "scenarios/torchtitan/llama3-8b-h100x8.json",
                                  {kRoot, std::move(sets)});
}

// The TP collectives of one built step (the groups of 8 ranks: with TP 8 on 8 GPUs every FSDP
// group has one rank) and their bytes.
std::vector<double> tp_collectives(const scenarios::Scenario& s) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  hardware::Cluster c(e, f, s.hw, static_cast<int>(s.job.parallel.total_gpus()));
  model::StepBuilder b(s.job, s.nccl, c, g);
  b.build();
  std::vector<double> bytes;
  for (std::size_t i = 0; i < b.ops().collectives.size(); ++i)
    if (b.ops().collectives[i].ranks->size() == 8) bytes.push_back(b.ops().collectives[i].bytes);
  return bytes;
}

bool contains(const std::vector<std::string>& v, const std::string& what) {
  for (const auto& x : v)
    if (x.find(what) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_SUITE("scenarios.torchtitan") {
  TEST_CASE("import: the 8B job file's keys mapped, the rest named as without effect") {
    const auto job =
        scenarios::import_torchtitan(job_file("llama3_8b.toml"), {2, 0, "h100-sxm"}, 8);
    const auto& s = job.scenario;
    CHECK(s["model"]["preset"] == "llama3-8b");
    CHECK(s["parallel"]["replica_gpus"] == 16);  // shard −1: all 16 GPUs
    CHECK(s["parallel"]["tp"] == 1);
    CHECK(s["training"]["rows_per_gpu"] == 2);
    CHECK(s["training"]["seq_len"] == 8192);
    CHECK(s["training"]["activation_checkpointing"] == "selective");
    CHECK(s["training"]["compile"] == true);
    CHECK(s["training"]["float8"] == true);
    CHECK(s["training"]["float8_all_gather"] == true);
    CHECK(s["training"]["float8_precompute_scale"] == true);
    CHECK(s["data"]["document_masking"] == false);
    CHECK(job.ignored.empty());
    CHECK(contains(job.no_effect, "training.steps"));
    CHECK(contains(job.no_effect, "checkpoint.interval"));
    // It loads as a scenario (the preset and profile resolve, the plan is valid).
    const auto tmp = std::filesystem::temp_directory_path() / "twin-test-import-8b.json";
    std::ofstream(tmp) << s.dump(2);
    CHECK_NOTHROW(scenarios::load_scenario(tmp, {kRoot, {}}));
    std::filesystem::remove(tmp);
  }

  TEST_CASE("import: 2D plan, async TP; what is not modelled is reported, not dropped") {
    const auto job =
        scenarios::import_torchtitan(job_file("llama3_70b.toml"), {32, 0, "h100-sxm"}, 8);
    const auto& s = job.scenario;
    CHECK(s["parallel"]["replica_gpus"] == 256);
    CHECK(s["parallel"]["tp"] == 8);
    CHECK(s["training"]["async_tp"] == true);
    CHECK(s["training"]["activation_checkpointing"] == "full");
    CHECK(s["training"]["float8"] == false);
    CHECK(contains(job.ignored, "memory.made_up_knob"));
    CHECK(contains(job.ignored, "fsdp_reshard_after_forward"));
  }

  TEST_CASE("import: the older layout (batch_size, training.compile, [float8])") {
    const auto job =
        scenarios::import_torchtitan(job_file("llama3_8b_old_layout.toml"), {1, 4, "h100-sxm"}, 8);
    const auto& s = job.scenario;
    CHECK(s["training"]["rows_per_gpu"] == 1);
    CHECK(s["training"]["compile"] == true);
    CHECK(s["training"]["float8"] == true);
    CHECK(s["parallel"]["replica_gpus"] == 4);
    CHECK(s["hardware"]["node"]["gpus"]["value"] == 4);  // --gpus-per-node 4
    CHECK(contains(job.ignored, "selective_ac_option"));
  }

  // TorchTitan's expert_parallel_comm_backend: standard (all_to_all_single per token-expert
  // pair), deepep or hybridep (once per EP rank).
  TEST_CASE("import: the EP exchange follows expert_parallel_comm_backend") {
    std::ifstream in(job_file("llama3_8b.toml"));
    const std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto tmp = std::filesystem::temp_directory_path() / "twin-test-import-ep.toml";
    auto import_with = [&](const std::string& extra) {
      std::string text = base;
      text.replace(text.find("[parallelism]\n"), 14, "[parallelism]\n" + extra);
      std::ofstream(tmp) << text;
      return scenarios::import_torchtitan(tmp.string(), {2, 0, "h100-sxm"}, 8);
    };
    CHECK(import_with("expert_parallel_degree = 4\n").scenario["training"]["ep_dispatch"] ==
          "pairs");
    for (const char* b : {"deepep", "hybridep"})
      CHECK(import_with(fmt::format("expert_parallel_degree = 4\n"
                                    "expert_parallel_comm_backend = \"{}\"\n",
                                    b))
                .scenario["training"]["ep_dispatch"] == "per_rank");
    // Without expert parallelism there is no exchange: the key has no effect.
    const auto dense = import_with("expert_parallel_comm_backend = \"deepep\"\n");
    CHECK_FALSE(dense.scenario["training"].contains("ep_dispatch"));
    CHECK(contains(dense.no_effect, "expert_parallel_comm_backend"));
    CHECK_THROWS_WITH_AS(import_with("expert_parallel_degree = 4\n"
                                     "expert_parallel_comm_backend = \"mpi\"\n"),
                         doctest::Contains("expected standard, deepep or hybridep"),
                         scenarios::InputError);
    std::filesystem::remove(tmp);
  }

  TEST_CASE("import: errors name the file and the key") {
    CHECK_THROWS_WITH_AS(
        scenarios::import_torchtitan(job_file("pipeline.toml"), {1, 0, "h100-sxm"}, 8),
        doctest::Contains("not modelled"), scenarios::InputError);
    try {
      scenarios::import_torchtitan(job_file("broken.toml"), {1, 0, "h100-sxm"}, 8);
      FAIL("no error");
    } catch (const scenarios::InputError& e) {
      CHECK(e.file.find("broken.toml") != std::string::npos);
      CHECK(e.message.find("TOML syntax, line 2") != std::string::npos);
    }
    // TP 8 does not divide 3 nodes × 7 GPUs.
    CHECK_THROWS_WITH_AS(
        scenarios::import_torchtitan(job_file("llama3_70b.toml"), {3, 0, "h100-sxm"}, 7),
        doctest::Contains("must equal"), scenarios::InputError);
  }

  TEST_CASE("TP collectives per step: 12 per layer under full checkpointing, 10 under selective") {
    // Per layer: forward all-gather and reduce-scatter around attention and around the FFN (4),
    // their mirror in backward (4), and the recompute: full re-runs all 4, selective only the
    // all-gathers (TorchTitan's op policy saves reduce-scatter outputs). Outside the layers:
    // the embedding's reduce-scatter and its backward all-gather, the head's all-gather and its
    // backward reduce-scatter. Each moves T·h bf16 = 16,384 · 4,096 · 2 bytes.
    const std::vector<std::string> tp = {"parallel.tp=8", "model.layers=2"};
    auto sets = tp;
    sets.push_back("training.activation_checkpointing=full");
    const auto full = tp_collectives(llama8b(sets).scenario);
    CHECK(full.size() == 12 * 2 + 4);
    for (double b : full) CHECK(b == 16384.0 * 4096 * 2);
    CHECK(tp_collectives(llama8b(tp).scenario).size() == 10 * 2 + 4);  // selective
    // Async TP splits each layer collective into an exposed chunk (1/8) and the rest (7/8).
    sets.push_back("training.async_tp=true");
    const auto async = tp_collectives(llama8b(sets).scenario);
    CHECK(async.size() == 2 * 12 * 2 + 4);
    double total = 0;
    for (double b : async) total += b;
    CHECK(total == doctest::Approx(28 * 16384.0 * 4096 * 2));
  }

  TEST_CASE("switches move time where their mechanism says") {
    const std::vector<std::string> tp = {"parallel.tp=8", "training.activation_checkpointing=full"};
    const auto sync = scenarios::simulate(llama8b(tp), {}).report;
    auto async_sets = tp;
    async_sets.push_back("training.async_tp=true");
    const auto async = scenarios::simulate(llama8b(async_sets), {}).report;
    CHECK(async.exposed_comm_s() < 0.6 * sync.exposed_comm_s());
    // Eager PyTorch: the layers' elementwise time × 1.43 (measured); loss and embedding unchanged.
    const auto compiled = scenarios::simulate(llama8b({"training.compile=true"}), {}).report;
    const auto eager = scenarios::simulate(llama8b({}), {}).report;
    const double ratio = eager.gpu_time("elementwise") / compiled.gpu_time("elementwise");
    CHECK(ratio > 1.2);
    CHECK(ratio < 1.43);
    // Float8: faster GEMMs, some cast traffic.
    const auto fp8 =
        scenarios::simulate(llama8b({"training.compile=true", "training.float8=true"}), {}).report;
    CHECK(fp8.gpu_time("other_gemm") < 0.75 * compiled.gpu_time("other_gemm"));
    CHECK(fp8.gpu_time("elementwise") > compiled.gpu_time("elementwise"));
    CHECK(fp8.step_time_s < compiled.step_time_s);
  }
}
