// `acrobat check MODEL`: parse and type-check a model, reporting every error.
#include <iostream>

#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"

namespace acrobat::cli {

Command add_check(CLI::App& app) {
  struct Args {
    std::string model, entry = "main";
    std::vector<std::string> sets;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("check", "Parse and type-check a model; report every error");
  cmd->add_option("model", a->model, "Model file (.acr)")->required();
  cmd->add_option("--set", a->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--entry", a->entry, "The function `run` would start from (default main)");
  return {cmd, [a] {
            auto module = compile_model(a->model, compile_options(a->sets));
            check_entry(*module->source, a->entry);
            std::cout << a->model << ": ok (" << module->functions.size() << " functions, "
                      << module->params.size() << " params)\n";
            return 0;
          }};
}

}  // namespace acrobat::cli
