// The strict loader: the only code that reads input JSON (STYLE.md). It parses once, at the edge,
// into typed structs, and rejects unknown keys, missing keys, wrong types and impossible values
// with the file and JSON path. Resolution order:
//   1. the scenario file and its `base` chain (a child's keys override its base's);
//   2. --set overrides of `model.preset` and `hardware.profile`;
//   3. the model preset and hardware profile files, with the scenario's own keys over them;
//   4. every other --set override;
//   5. defaults for absent keys that have one; then the checks.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"

namespace twin::scenarios {

using Json = nlohmann::ordered_json;

// A bad input: which file, where in it, what was expected. `twin` exits 2 on it.
struct InputError : std::runtime_error {
  InputError(std::string file_, std::string path_, std::string msg);
  std::string file, path, message;
};

struct LoadOptions {
  std::filesystem::path data_dir;  // holds scenarios/models/ and hardware/profiles/
  std::vector<std::string> sets;   // "a.b.c=value"
};

struct Loaded {
  Scenario scenario;
  Json resolved;  // the fully resolved scenario, every key present
};

Loaded load_scenario(const std::filesystem::path& file, const LoadOptions& opts);

// Reads a JSON file; a syntax error names the file, line and column.
Json read_json_file(const std::filesystem::path& file);

// The data directory: --data-dir, else $TWIN_DATA_DIR, else the one compiled in.
std::filesystem::path default_data_dir();

}  // namespace twin::scenarios
