// libFuzzer target for every input parser: the strict scenario loader (with a `--set`), the
// document-length file, the Slurm node list and TorchTitan job files. The input is
//     [--set KEY=VALUE\n] SCENARIO [\n---\n LENGTHS [\n---\n NODES]]
// or `--toml\n` and a TorchTitan job file, imported (scenarios/torchtitan_import.hpp) for 2 nodes
// of 8 GPUs and the scenario it makes loaded.
// SCENARIO is a scenario file; empty, a fixed one that reads LENGTHS (data.doc_lengths_file) and
// NODES (placement.node_list_file) is used. Every bad input must end in an InputError (exit 2 in
// `twin`); anything else — another exception, a crash, a hang, a sanitizer report — is a bug.
// Build and run: ./test.sh --fuzz (30 s, CI) or FUZZ_SECONDS=600 ./test.sh --fuzz.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "scenarios/loader.hpp"
#include "scenarios/torchtitan_import.hpp"

namespace {
std::string cut(std::string& text, const std::string& sep) {
  const auto at = text.find(sep);
  if (at == std::string::npos) return std::exchange(text, "");
  std::string head = text.substr(0, at);
  text = text.substr(at + sep.size());
  return head;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("twin-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.rfind("--toml\n", 0) == 0) {
    std::ofstream(dir / "job.toml", std::ios::binary | std::ios::trunc) << text.substr(7);
    try {
      const auto job =
          twin::scenarios::import_torchtitan((dir / "job.toml").string(), {2, 0, "h100-sxm"}, 8);
      std::ofstream(dir / "imported.json", std::ios::binary | std::ios::trunc)
          << job.scenario.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      twin::scenarios::load_scenario(dir / "imported.json", {TWIN_SOURCE_DIR, {}});
    } catch (const twin::scenarios::InputError&) {
    }
    return 0;
  }
  std::vector<std::string> sets;
  if (text.rfind("--set ", 0) == 0) sets.push_back(cut(text, "\n").substr(6));
  std::string scenario = cut(text, "\n---\n"), lengths = cut(text, "\n---\n"), nodes = text;
  if (scenario.empty())
    scenario = std::string("{\"base\": \"") + TWIN_SOURCE_DIR +
               "/scenarios/europa.json\", \"name\": \"f\", "
               "\"data\": {\"doc_lengths_file\": \"lengths.txt\"}, "
               "\"placement\": {\"policy\": \"file\", \"node_list_file\": \"nodes.txt\"}}";
  std::ofstream(dir / "scenario.json", std::ios::binary | std::ios::trunc) << scenario;
  std::ofstream(dir / "lengths.txt", std::ios::binary | std::ios::trunc) << lengths;
  std::ofstream(dir / "nodes.txt", std::ios::binary | std::ios::trunc) << nodes;
  try {
    twin::scenarios::load_scenario(dir / "scenario.json", {TWIN_SOURCE_DIR, sets});
  } catch (const twin::scenarios::InputError&) {
  }
  return 0;
}
