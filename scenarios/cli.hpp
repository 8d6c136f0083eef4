// The commands of `twin` (README "Commands"): each registered on the CLI11 app with its options
// and --help texts, and what runs it once parsed. main.cpp parses and reports errors.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "scenarios/commands.hpp"

namespace twin::scenarios {

// A registered command: its subcommand and what runs it (its arguments live in the closure).
struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

// The app's description, version, footer and the options every command shares.
void describe(CLI::App& app, CommonArgs& common);
// Every command, in the order --help lists them.
std::vector<Command> add_commands(CLI::App& app, CommonArgs& common);

}  // namespace twin::scenarios
