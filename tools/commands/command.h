// The commands of the `acrobat` CLI, one file each: a function that adds its subcommand (options
// and help) to the app and returns what runs it once the command line is parsed. tools/main.cpp
// lists them.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace acrobat::cli {

struct Command {
  CLI::App* cli;             // the subcommand: parsed when *cli is true
  std::function<int()> run;  // its action; returns the exit status
};

Command add_run(CLI::App& app);
Command add_grad(CLI::App& app);
Command add_train(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_emit(CLI::App& app);
Command add_compile(CLI::App& app);
Command add_explain(CLI::App& app);
Command add_check(CLI::App& app);
Command add_bench(CLI::App& app);

}  // namespace acrobat::cli
