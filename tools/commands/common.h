// What the commands that run a model share: its options (the model, its params, inputs, dims,
// engine, threads, batch), their checked numbers, and the model prepared from them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engines/engine.h"
#include "engines/inputs.h"
#include "engines/make_engine.h"

namespace acrobat::cli {

struct RunOptions {
  std::string model;
  std::string params;
  uint64_t seed = 0;
  std::string input;
  std::string vocab;
  std::vector<std::string> sets;
  size_t limit = 0;  // 0: every instance (--limit itself takes 1 or more)
  std::string output;
  std::optional<size_t> show;
  std::string entry = "main";
  std::string emit;  // a stage of pipeline_stages(): print it instead of running
  std::string engine = "batched";
  std::string scheduler = "inline-depth";
  size_t batch = 64;
  bool block_stats = false;
  std::vector<std::string> disable;  // analyses switched off (ablation)
  int threads = 0;                   // threads per kernel (0: every core)
  std::string object;                // aot: a prebuilt shared object
  std::string on_error = "raise";    // an instance that fails: "raise" or "skip" (engine.h, OnError)
  int64_t max_steps = 0;             // each instance's step budget (Engine::limit_steps); 0: none
};

// The numeric options of the commands as given, checked and converted by read(): CLI11 would wrap
// `--batch -1` to 2^64-1 and take `--threads 100000` as given.
struct NumberArgs {
  std::string seed, limit, show, batch, threads, max_steps;
  void read(RunOptions& o) const;
};

// Help texts of the options several commands take.
extern const char* const kSetHelp;
std::string disable_help();

// The model file and its parameters (a safetensors file, or random from --seed): run, grad, serve.
void add_model_options(CLI::App* cmd, RunOptions& o, NumberArgs& numbers, const char* model_help = "Model file (.acr)");
// --engine with the engines of make_engine.h (`allowed`: a subset of them, or all when empty).
// --max-steps into numbers.max_steps; `default_text` says what it is when not given.
void add_max_steps_option(CLI::App* cmd, NumberArgs& numbers, const std::string& default_text);
CLI::Option* add_engine_option(CLI::App* cmd, std::string& engine, const std::string& help,
                               std::vector<std::string> allowed = {});

// A compiled model with its parameters and input instances: what run, grad, train and bench start
// from.
struct Prepared {
  std::shared_ptr<const ir::Module> module;
  std::shared_ptr<const ParamStore> params;
  std::vector<Value> inputs;
  InputSpec spec;
  std::string vocab;
  Type output_type;
};
// `with_inputs` false (serve): the model and its params only.
Prepared prepare(const RunOptions& o, bool with_inputs = true);

// The engine the options name (make_engine), on the prepared model; the AOT engine says on stderr
// where its compiled model came from.
std::unique_ptr<Engine> make_cli_engine(const RunOptions& o, const Prepared& p);

// Prints "error: <message>" as one line.
void report_failure(std::string message);

}  // namespace acrobat::cli
