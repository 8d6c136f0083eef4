// libFuzzer target for the sweep: its grid parser, the resume reader of FILE.partial and a bounded
// end-to-end run of the small golden scenario at every point. The input is
//     [--set KEY=VALUE\n]... [--grid KEY=V1,V2,...\n]... [---\n PARTIAL]
// PARTIAL is the progress file the sweep resumes from; a first line "@" stands for the header of
// these arguments (so that the rows after it are read). At most 8 points, 5·10⁶ events and 2 GiB
// per run. Bad input must end in an InputError or the event budget's error; anything else — another
// exception, a crash, a hang, a sanitizer report — is a bug.
// Build and run: ./test.sh --fuzz (CI) or FUZZ_SECONDS=600 ./test.sh --fuzz.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "scenarios/commands.hpp"
#include "sim/engine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace twin::scenarios;
  static const std::filesystem::path progress =
      std::filesystem::temp_directory_path() /
      ("twin-fuzz-sweep-" + std::to_string(::getpid()) + ".partial");
  std::string text(reinterpret_cast<const char*>(data), size), partial;
  if (const auto at = text.find("---\n"); at != std::string::npos)
    partial = text.substr(at + 4), text.resize(at);
  CommonArgs args;
  args.scenario = std::string(TWIN_SOURCE_DIR) + "/tests/golden/small.json";
  args.data_dir = TWIN_SOURCE_DIR;
  args.max_events = 5'000'000;
  args.max_memory_GiB = 2;
  SweepArgs sw;
  std::size_t points = 1;
  for (std::size_t start = 0; start < text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("--set ", 0) == 0) args.sets.push_back(line.substr(6));
    if (line.rfind("--grid ", 0) == 0) {
      sw.grid.push_back(line.substr(7));
      points *= 1 + static_cast<std::size_t>(std::count(line.begin(), line.end(), ','));
    }
  }
  if (points > 8) return 0;  // bounded: every point is a real run
  try {
    if (partial.rfind("@\n", 0) == 0) partial = sweep_progress_header(args, sw) + partial.substr(1);
    std::ofstream(progress, std::ios::binary | std::ios::trunc) << partial;
    sweep_json(args, sw, progress.string());
  } catch (const InputError&) {
  } catch (const twin::sim::EventLimitExceeded&) {
  }
  return 0;
}
