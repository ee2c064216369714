// The acrobat command line: the commands of tools/commands/, and what an error costs: a user error
// or a failure of the machine exits 1 with one message, an internal error (a bug in acrobat) exits
// kInternalErrorExit.
#include <filesystem>
#include <iostream>
#include <new>
#include <system_error>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands/command.h"
#include "commands/common.h"

int main(int argc, char** argv) {
  using namespace acrobat;
  using namespace acrobat::cli;
  CLI::App app{"acrobat: an auto-batching compiler and runtime for dynamic deep learning"};
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_run(app),     add_grad(app),    add_serve(app),
                                         add_train(app),   add_emit(app),    add_compile(app),
                                         add_explain(app), add_check(app),   add_bench(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); every command-line error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }

  // Every exception ends as one message: user errors as they are, the others (out of memory, the
  // file system, the system, JSON) named for what they are.
  try {
    for (const Command& c : commands)
      if (*c.cli) return c.run();
  } catch (const UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const InternalError& e) {
    report_failure(e.what());
    return kInternalErrorExit;
  } catch (const std::bad_alloc&) {
    report_failure("out of memory: the run needs more memory than the machine could give; use a "
                   "smaller --batch or smaller dims");
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    report_failure(e.what());  // "filesystem error: <what> [path]"
    return 1;
  } catch (const std::system_error& e) {
    report_failure(std::string("system error: ") + e.what());
    return 1;
  } catch (const nlohmann::json::exception& e) {
    report_failure(std::string("JSON: ") + e.what());
    return 1;
  } catch (const std::exception& e) {
    report_failure(e.what());
    return 1;
  } catch (...) {
    report_failure("unknown exception");
    return 1;
  }
  return 0;
}
