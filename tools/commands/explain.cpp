// `acrobat explain MODEL`: what the compiler decided (analysis/explain.h).
#include <iostream>

#include "analysis/explain.h"
#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"

namespace acrobat::cli {

Command add_explain(CLI::App& app) {
  struct Args {
    std::string model;
    std::vector<std::string> sets, disable;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "explain", "What the compiler decided: per function its clones and specialisations, per "
                 "static block its operators, argument modes, depth, phase and FLOPs");
  cmd->add_option("model", a->model, "Model file (.acr)")->required();
  cmd->add_option("--set", a->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--disable", a->disable, disable_help())->delimiter(',');
  return {cmd, [a] {
            auto module = compile_model(a->model, compile_options(a->sets, a->disable));
            std::cout << a->model << "\n" << analysis::explain(*module);
            return 0;
          }};
}

}  // namespace acrobat::cli
