// What the commands of `twin` share on the command line (cli.cpp, cli_tools.cpp): the scenario,
// its overrides and, where a command has them, --json, the simulation limits and --quiet.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "scenarios/cli.hpp"

namespace twin::scenarios {

// What each command takes: the scenario and overrides always; --json where it has a readable
// form too; the simulation limits where it simulates; --quiet where it reports progress.
enum Takes : unsigned { kJson = 1, kLimits = 2, kQuiet = 4 };
void add_common(CLI::App* sub, CommonArgs& a, unsigned takes);

// Numbers in words a user reads (CLI11's PositiveNumber and NonNegativeNumber print their range
// up to 1.8e308 in full, and let inf through): finite and above 0; finite and at least 0.
CLI::Validator positive_finite();
CLI::Validator non_negative_finite();

// The commands that read traces, time collectives and kernels, write reports and import jobs,
// in the order --help lists them (cli_tools.cpp).
std::vector<Command> add_tool_commands(CLI::App& app, CommonArgs& common);

}  // namespace twin::scenarios
