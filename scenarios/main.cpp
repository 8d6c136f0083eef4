// twin: the command. load → build → simulate → report. Only this file exits.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "reports/output.hpp"
#include "scenarios/cli.hpp"
#include "sim/engine.hpp"
#include "sim/large_pages.hpp"

namespace {

using namespace twin::scenarios;

// An unknown command is named as such (CLI11 would say a subcommand is required).
bool unknown_command(const std::vector<Command>& commands, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return false;
  if (std::any_of(commands.begin(), commands.end(),
                  [&](const Command& c) { return c.sub->get_name() == argv[1]; }))
    return false;
  std::string names;
  for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.sub->get_name();
  fmt::print(stderr, "twin: error: unknown command \"{}\" (commands: {})\n", argv[1], names);
  return true;
}

// Runs the parsed command; errors end in a message and exit status 2 (input) or 1 (ours).
int run_command(const std::vector<Command>& commands) {
  try {
    for (const auto& c : commands)
      if (*c.sub) return c.run();
  } catch (const InputError& e) {
    fmt::print(stderr, "twin: error: {}\n", e.what());
    return 2;
  } catch (const twin::sim::EventLimitExceeded& e) {
    fmt::print(stderr, "twin: error: {} (raise --max-events)\n", e.what());
    return 2;
  } catch (const twin::reports::OutputError& e) {
    fmt::print(stderr, "twin: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "twin: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twin: a discrete-event digital twin of 1T-parameter MoE pre-training on JUPITER"};
  CommonArgs common;
  describe(app, common);
  const auto commands = add_commands(app, common);
  twin::reports::remove_temporaries_on_signals();
  twin::sim::keep_freed_heap();  // sweeps run many simulations (sim/large_pages.hpp)
  if (unknown_command(commands, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "twin: error: {}\n(twin --help, or twin COMMAND --help)\n", e.what());
    return 2;
  }
  common.progress = !common.quiet;
  return run_command(commands);
}
