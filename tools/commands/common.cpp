#include "commands/common.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "cli_options.h"
#include "compiler/pipeline.h"
#include "engines/aot_engine.h"
#include "lang/frontend.h"

namespace acrobat::cli {

void NumberArgs::read(RunOptions& o) const {
  if (!seed.empty()) o.seed = parse_seed("--seed", seed);
  if (!limit.empty()) o.limit = parse_number("--limit", limit, 1, kMaxCount);
  if (!show.empty()) o.show = parse_number("--show", show, 0, kMaxCount);
  if (!batch.empty()) o.batch = parse_number("--batch", batch, 0, kMaxBatch);
  if (!threads.empty()) o.threads = static_cast<int>(parse_number("--threads", threads, 1, kMaxThreads));
  if (!max_steps.empty()) o.max_steps = static_cast<int64_t>(parse_number("--max-steps", max_steps, 0, kMaxSteps));
}

void add_max_steps_option(CLI::App* cmd, NumberArgs& numbers, const std::string& default_text) {
  cmd->add_option("--max-steps", numbers.max_steps,
                  "Most calls an instance may make, a loop's iterations included; one more fails that instance "
                  "at the call, naming it (a loop that never ends stops there); 0: no limit (default " +
                      default_text + ")");
}

const char* const kSetHelp = "Override dims: NAME=VALUE (repeatable, or comma-separated)";

std::string disable_help() {
  return "Switch analyses off for ablation: " + analysis_names_text() + " (comma-separated)";
}

void add_model_options(CLI::App* cmd, RunOptions& o, NumberArgs& numbers, const char* model_help) {
  cmd->add_option("model", o.model, model_help)->required();
  cmd->add_option("--params", o.params, "Parameters (safetensors); default: random from --seed");
  cmd->add_option("--seed", numbers.seed, "Seed for random parameters (default 0)");
}

CLI::Option* add_engine_option(CLI::App* cmd, std::string& engine, const std::string& help,
                               std::vector<std::string> allowed) {
  if (allowed.empty()) allowed = engine_names();
  return cmd->add_option("--engine", engine, help)->check(CLI::IsMember(allowed));
}

Prepared prepare(const RunOptions& o, bool with_inputs) {
  Prepared p;
  const CompileOptions copts = compile_options(o.sets, o.disable);
  if (with_inputs && o.input.empty()) throw UserError("--input KIND:FILE is required");
  p.module = compile_model(o.model, copts);
  check_entry(*p.module->source, o.entry);
  int entry = entry_function(*p.module, o.entry);
  const ir::Function& f = p.module->functions[entry];
  p.output_type = f.ret;
  if (with_inputs) {
    p.spec = parse_input_spec(o.input);
    p.vocab = vocab_path(p.spec, o.vocab);
    SizeNamesScope names(p.module->plan->size_names);  // messages name the model's sizes
    p.inputs = load_inputs(p.spec, f.vars[f.params[0]].type, p.vocab, o.limit);
  }
  if (o.params.empty()) {
    std::cerr << "note: no --params given; parameters initialised from seed " << o.seed << "\n";
    p.params = std::make_shared<ParamStore>(init_params(*p.module, o.seed));
  } else {
    std::vector<std::string> unused;
    p.params = std::make_shared<ParamStore>(load_params(*p.module, o.params, &unused));
    for (const auto& name : unused)
      std::cerr << "warning: " << o.params << ": tensor '" << name
                << "' is not a param of the model; ignored\n";
  }
  return p;
}

std::unique_ptr<Engine> make_cli_engine(const RunOptions& o, const Prepared& p) {
  EngineSpec spec;
  spec.engine = o.engine;
  spec.threads = o.threads;
  spec.scheduler = parse_scheduler(o.scheduler);
  spec.object = o.object;
  spec.max_steps = o.max_steps;
  std::unique_ptr<Engine> engine = make_engine(spec, p.module, p.params);
  if (const auto* aot = dynamic_cast<const AotEngine*>(engine.get())) {
    const AotBuildInfo& info = aot->build_info();
    std::cerr << fmt::format("note: compiled model {} ({}, loaded in {:.3f} s; {} threads)\n",
                             info.object_path,
                             !o.object.empty() ? "given"
                             : info.cached     ? "from the cache"
                                               : fmt::format("built in {:.1f} s", info.compile_seconds),
                             info.generate_seconds + info.load_seconds, thread_count(o.threads));
  }
  return engine;
}

void report_failure(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::cerr << "error: " << message << "\n";
}

}  // namespace acrobat::cli
