// The small golden scenario (tests/golden/small.json: 4 layers, 8 GPUs), loaded with --set
// overrides, for the tests that simulate a step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::test {
inline scenarios::Loaded small(std::vector<std::string> sets = {}) {
  const std::filesystem::path root = TWIN_SOURCE_DIR;
  return scenarios::load_scenario(root / "tests/golden/small.json", {root, std::move(sets)});
}
}  // namespace twin::test
