// libFuzzer target for the strict loader: the input is a scenario file, optionally preceded by
// a line "--set KEY=VALUE". Every bad input must end in an InputError (exit 2 in `twin`);
// anything else — another exception, a crash, a hang, a sanitizer report — is a bug.
// Build and run: ./test.sh --fuzz (30 s, CI) or FUZZ_SECONDS=600 ./test.sh --fuzz.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "scenarios/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("twin-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sets;
  if (text.rfind("--set ", 0) == 0) {
    const auto nl = text.find('\n');
    sets.push_back(text.substr(6, nl == std::string::npos ? std::string::npos : nl - 6));
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  const auto file = dir / "scenario.json";
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  try {
    twin::scenarios::load_scenario(file, {TWIN_SOURCE_DIR, sets});
  } catch (const twin::scenarios::InputError&) {
  }
  return 0;
}
