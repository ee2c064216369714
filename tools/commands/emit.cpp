// `acrobat emit STAGE MODEL`: prints a stage of the compiler (compiler/pipeline.h).
#include <iostream>

#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"

namespace acrobat::cli {

Command add_emit(CLI::App& app) {
  struct Args {
    std::string stage, model;
    std::vector<std::string> sets, disable;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("emit", "Print a stage of the compiler");
  cmd->add_option("stage", a->stage,
                  "ast (checked syntax tree), ir (A-normal form), specialise, reuse or concurrent "
                  "(the IR after that pass), blocks (static blocks and their plan), depth (chain "
                  "lengths, ghost operations and phase ends), ownership (the IR with the dups and "
                  "drops of lazy tensors)")
      ->required()
      ->check(CLI::IsMember(pipeline_stages()));
  cmd->add_option("model", a->model, "Model file (.acr)")->required();
  cmd->add_option("--set", a->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--disable", a->disable, disable_help())->delimiter(',');
  return {cmd, [a] {
            CompileOptions options = compile_options(a->sets, a->disable);
            options.print_after = a->stage;
            options.dump = &std::cout;
            compile_model(a->model, options);
            return 0;
          }};
}

}  // namespace acrobat::cli
