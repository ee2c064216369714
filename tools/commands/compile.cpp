// `acrobat compile MODEL -o OBJECT`: analyses, C++ generation and the system compiler, each timed;
// the shared object `run --object` and acrobat_add_model load.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <system_error>

#include <fmt/format.h>

#include "codegen/build.h"
#include "codegen/emit_cpp.h"
#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"
#include "io/files.h"
#include "support/clock.h"

namespace acrobat::cli {

namespace {

struct CompileArgs {
  std::string model, output, cache_dir, emit_cpp;
  std::vector<std::string> sets, disable;
};

int compile(const CompileArgs& a) {
  auto t0 = Clock::now();
  auto module = compile_model(a.model, compile_options(a.sets, a.disable));
  double analysis_seconds = seconds_since(t0);
  auto t1 = Clock::now();
  codegen::GeneratedCpp code = codegen::emit_cpp(*module);
  double generate_seconds = seconds_since(t1);
  if (!a.emit_cpp.empty()) io::write_file(a.emit_cpp, code.source);
  codegen::BuiltObject built = codegen::build_shared_object(code, a.cache_dir);
  std::error_code ec;
  std::filesystem::copy_file(built.path, a.output, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw UserError("cannot write " + a.output + ": " + ec.message());
  std::cout << fmt::format(
      "{}: {} static blocks, {} lines of C++ (code {}); parse+check+analyses {:.3f} s, C++ "
      "generation {:.3f} s, system compiler {}\n",
      a.output, module->plan->blocks.size(), std::count(code.source.begin(), code.source.end(), '\n'),
      code.hash, analysis_seconds, generate_seconds,
      built.cached ? std::string("not run (cached)") : fmt::format("{:.2f} s", built.seconds));
  return 0;
}

}  // namespace

Command add_compile(CLI::App& app) {
  auto a = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand(
      "compile", "Compile a model ahead of time to a shared object (C++ host program and batched "
                 "kernels, built with the system compiler, cached by content)");
  cmd->add_option("model", a->model, "Model file (.acr)")->required();
  cmd->add_option("-o,--output", a->output, "The shared object to write")->required();
  cmd->add_option("--set", a->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--disable", a->disable, disable_help())->delimiter(',');
  cmd->add_option("--cache-dir", a->cache_dir, "Compile cache (default ~/.cache/acrobat)");
  cmd->add_option("--emit-cpp", a->emit_cpp, "Also write the generated C++ to this file");
  return {cmd, [a] { return compile(*a); }};
}

}  // namespace acrobat::cli
