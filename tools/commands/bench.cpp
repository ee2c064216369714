// `acrobat bench`: the engines side by side on one model and data set (tools/bench.h), or every
// model of models/ (--all), the ragged encoder against PyTorch's strategies (--ragged), or greedy
// generation with models/gpt.acr against PyTorch's strategies (--generate).
#include <sstream>

#include "bench.h"
#include "cli_options.h"
#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"

namespace acrobat::cli {

namespace {

struct BenchArgs {
  RunOptions run;
  NumberArgs numbers;
  std::string batches = "1,8,64", schedulers = "inline-depth,depth,agenda", json, reps = "3", pytorch = "300";
  std::string engines = "batched", threads = "1", out = "bench/results/all", cell_batches = "2";
  std::vector<std::string> lengths;
  std::string prompts = "mnli", budgets = "mrpc";
  bool ablation = false, all = false, quick = false, busy = false, ragged = false, generate = false,
       no_pytorch = false, no_dense = false, train = false;
  std::string pytorch_json, table_from;
  bool given_batch = false, given_threads = false, given_engine = false, given_out = false, given_reps = false;
};

// "batched,aot" as a list; anything else is a UserError.
std::vector<std::string> split_engines(const std::string& engines) {
  std::vector<std::string> out;
  std::stringstream es(engines);
  std::string item;
  while (std::getline(es, item, ',')) {
    if (item != "batched" && item != "aot")
      throw UserError("--engine '" + engines + "': expected batched, aot or batched,aot");
    out.push_back(item);
  }
  return out;
}

// Each analysis off in turn, then all of them, each on its own compilation of the model: the
// ablation's configurations.
std::vector<BenchConfig> ablation_configs(const ir::Module& module) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> ablations = {
      {"all analyses", {}},
      {"no reuse analysis", {"reuse"}},
      {"no ghost operations", {"ghosts"}},
      {"no phases", {"phases"}},
      {"no concurrent calls", {"concurrent"}},
      {"no shared nodes", {"share"}},
      {"none", {"specialise", "reuse", "ghosts", "phases", "concurrent", "share"}}};
  std::vector<BenchConfig> configs;
  for (const auto& [name, disabled] : ablations)
    // From the same checked syntax tree: the inputs refer to its data type definitions.
    configs.push_back({name, compile_checked(module.source, compile_options({}, disabled))});
  return configs;
}

int bench_one(const BenchArgs& a) {
  const RunOptions& o = a.run;
  // Every option is checked before the model is compiled and the inputs are read.
  std::vector<int64_t> batch_sizes = parse_number_list("--batch", a.batches, 1, kMaxBatch);
  std::vector<int64_t> thread_counts = parse_number_list("--threads", a.threads, 1, kMaxThreads);
  size_t pytorch_limit = parse_number("--pytorch-limit", a.pytorch, 0, kMaxCount);
  int repetitions = static_cast<int>(parse_number("--reps", a.reps, 1, kMaxReps));
  Prepared p = prepare(o);
  std::vector<BenchConfig> configs = {{"as given", p.module}};
  if (a.ablation) configs = ablation_configs(*p.module);
  BenchOptions b;
  b.model = o.model;
  b.batches.assign(batch_sizes.begin(), batch_sizes.end());
  b.schedulers.clear();
  std::stringstream ss(a.schedulers);
  std::string item;
  while (std::getline(ss, item, ',')) b.schedulers.push_back(scheduler_name(parse_scheduler(item)));
  b.sets = o.sets;
  b.reps = repetitions;
  b.engines = split_engines(a.engines);
  b.threads.clear();
  for (int64_t t : thread_counts) b.threads.push_back(static_cast<int>(t));
  b.json_path = a.json;
  b.busy_neighbour = a.busy;
  // The PyTorch oracle implements the models of models/ by their file name.
  std::string stem = o.model.substr(o.model.find_last_of('/') + 1);
  stem = stem.substr(0, stem.find('.'));
  if (pytorch_limit > 0 && (stem == "treelstm" || stem == "mvrnn" || stem == "birnn") &&
      (p.spec.kind == InputKind::Sst || p.spec.kind == InputKind::SstTokens) && o.params.empty()) {
    b.pytorch_model = stem;
    b.pytorch_script = std::string(ACROBAT_SOURCE_DIR) + "/tests/reference/bench_eager.py";
    b.data_path = p.spec.path;
    b.vocab_path = p.vocab;
    b.pytorch_limit = pytorch_limit;
  }
  return bench_command(b, configs, p.params, p.inputs);
}

// --batch and --threads as the ragged and generation sweeps take them.
std::vector<size_t> batch_list(const BenchArgs& a) {
  std::vector<size_t> out;
  for (int64_t b : parse_number_list("--batch", a.batches, 1, kMaxBatch)) out.push_back(static_cast<size_t>(b));
  return out;
}
std::vector<int> thread_list(const BenchArgs& a) {
  std::vector<int> out;
  for (int64_t t : parse_number_list("--threads", a.threads, 1, kMaxThreads)) out.push_back(static_cast<int>(t));
  return out;
}

int bench_ragged(const BenchArgs& a) {
  BenchRaggedOptions r;
  r.source_dir = ACROBAT_SOURCE_DIR;
  r.model = a.run.model.empty() ? r.source_dir + "/models/encoder.acr" : a.run.model;
  r.params = a.run.params;
  r.lengths = a.lengths;
  r.train = a.train;
  if (a.train) {
    r.out_dir = "bench/results/ragged-train";
    r.batches = {32, 64};
  }
  if (a.given_batch) r.batches = batch_list(a);
  if (a.given_threads) r.threads = thread_list(a);
  if (a.given_engine) r.engines = split_engines(a.engines);
  if (a.given_out) r.out_dir = a.out;
  r.json_path = a.json;
  r.reps = static_cast<int>(parse_number("--reps", a.reps, 1, kMaxReps));
  r.batches_per_cell = static_cast<int>(parse_number("--batches", a.cell_batches, 1, 1000));
  r.pytorch = !a.no_pytorch;
  r.pytorch_json = a.pytorch_json;
  r.dense = !a.no_dense && !a.train;
  return bench_ragged_command(r);
}

// --quick: dims small enough for a test (D / NH stays 64, as the model's attention scale wants), a
// few instances, one batch size, one thread, one repetition.
int bench_generate(const BenchArgs& a) {
  BenchGenerateOptions g;
  g.source_dir = ACROBAT_SOURCE_DIR;
  g.model = a.run.model.empty() ? g.source_dir + "/models/gpt.acr" : a.run.model;
  g.params = a.run.params;
  g.sets = a.run.sets;
  g.prompts = a.prompts;
  g.budgets = a.budgets;
  if (a.quick) {
    if (g.sets.empty()) g.sets = {"D=128", "NH=2", "FF=256", "L=2", "V=64"};
    g.instances = 8;
    g.batches = {4};
    g.threads = {1};
    g.reps = 1;
  }
  if (a.run.limit > 0) g.instances = a.run.limit;
  if (a.given_batch) g.batches = batch_list(a);
  if (a.given_threads) g.threads = thread_list(a);
  if (a.given_engine) g.engines = split_engines(a.engines);
  if (a.given_out) g.out_dir = a.out;
  g.json_path = a.json;
  if (!a.quick || a.given_reps) g.reps = static_cast<int>(parse_number("--reps", a.reps, 1, kMaxReps));
  g.pytorch = !a.no_pytorch;
  return bench_generate_command(g);
}

int bench(BenchArgs& a) {
  a.numbers.read(a.run);
  if (a.all) {
    BenchAllOptions all;
    all.source_dir = ACROBAT_SOURCE_DIR;
    all.out_dir = a.out;
    all.reps = static_cast<int>(parse_number("--reps", a.reps, 1, kMaxReps));
    all.quick = a.quick;
    all.table_from = a.table_from;
    return bench_all_command(all);
  }
  if (!a.table_from.empty()) throw UserError("bench: --table-from is for --all (the all.json of an earlier run)");
  if (a.ragged && a.generate) throw UserError("bench: --ragged and --generate are separate benchmarks; give one");
  if (a.train && !a.ragged) throw UserError("bench: --train is a kind of --ragged benchmark (the encoder layer's training step)");
  if (a.ragged) return bench_ragged(a);
  if (a.generate) return bench_generate(a);
  if (a.run.model.empty()) throw UserError("bench: a model file is required (or --all)");
  return bench_one(a);
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  RunOptions& o = a->run;
  auto* cmd = app.add_subcommand(
      "bench", "Throughput of the reference engine, the batched engine (each scheduler and batch "
               "size) and eager PyTorch, side by side, with the sgemm yardstick");
  cmd->add_option("model", o.model, "Model file (.acr); not with --all");
  cmd->add_option("--input", o.input, "KIND:FILE; not with --all");
  cmd->add_option("--vocab", o.vocab, "Vocabulary for sst inputs");
  cmd->add_option("--set", o.sets, kSetHelp)->delimiter(',');
  cmd->add_option("--limit", a->numbers.limit,
                  "Use only the first N instances (N >= 1); --generate: instances per cell (default 128)");
  cmd->add_option("--disable", o.disable, disable_help())->delimiter(',');
  cmd->add_option("--engine", a->engines, "Engines besides the reference: batched, aot or batched,aot");
  cmd->add_option("--threads", a->threads, "Thread counts from 1 to 1024, comma-separated (default 1)");
  cmd->add_flag("--all", a->all,
                "Every model of models/ at its sizes on its data with the oracle's weights "
                "(the other options but --reps are ignored): all.md, all.json, all.png");
  cmd->add_option("--table-from", a->table_from,
                  "--all: write all.md and all.png from the all.json of an earlier run instead of measuring");
  cmd->add_option("--out", a->out, "--all, --ragged, --generate: output directory (default bench/results/all, "
                                    "ragged, generate)");
  cmd->add_flag("--quick", a->quick, "--all, --generate: small sizes, few instances, one repetition");
  cmd->add_flag("--ablation", a->ablation,
                "Rows for each analysis switched off in turn and for all off (ignores --disable)");
  cmd->add_flag("--busy-neighbour", a->busy,
                "Keep one core busy with another process while the rows run (how the "
                "threads fare when the machine is shared)");
  cmd->add_option("--params", o.params, "Parameters (default: random, seed 0)");
  cmd->add_option("--batch", a->batches, "Batch sizes, comma-separated (default 1,8,64)");
  cmd->add_option("--schedulers", a->schedulers, "Schedulers, comma-separated");
  cmd->add_option("--reps", a->reps, "Repetitions per figure, 1 to 1000 (median; default 3)");
  cmd->add_option("--json", a->json, "Write the results as JSON to this file");
  cmd->add_option("--pytorch-limit", a->pytorch,
                  "Instances for the eager PyTorch row (default 300; 0: no PyTorch row)");
  cmd->add_flag("--ragged", a->ragged,
                "The encoder layer (default models/encoder.acr) on the length files of "
                "data/lengths, beside PyTorch's padded, sorted and nested strategies: "
                "ragged.json, ragged.md, ragged.png in --out (default bench/results/ragged); "
                "--batch defaults to 32,64,128, --threads to 1,2, --engine to aot,batched");
  cmd->add_option("--lengths", a->lengths, "--ragged: length files, names in data/lengths or paths (default: all)")
      ->delimiter(',');
  cmd->add_option("--batches", a->cell_batches, "--ragged: batches per cell, 1 to 1000 (default 2)");
  cmd->add_flag("--no-pytorch", a->no_pytorch, "--ragged, --generate: acrobat's rows only");
  cmd->add_option("--pytorch-json", a->pytorch_json,
                  "--ragged: PyTorch's rows from this file (the pytorch.json of an earlier run with the same "
                  "cells) instead of running its side again");
  cmd->add_flag("--generate", a->generate,
                "Greedy generation with models/gpt.acr (prompt lengths from --prompts, budgets of new "
                "tokens from --budgets) beside PyTorch's padded, drop-finished and one-at-a-time "
                "strategies: generate.json, generate.md, generate.png in --out (default "
                "bench/results/generate); --batch defaults to 16,64,128, --threads to 1,2, --engine "
                "to aot,batched, --limit to 128");
  cmd->add_option("--prompts", a->prompts, "--generate: the prompts' length file, a name in data/lengths or a path "
                                           "(default mnli)");
  cmd->add_option("--budgets", a->budgets, "--generate: the budgets' length file, clipped to 1..256 (default mrpc)");
  cmd->add_flag("--no-dense", a->no_dense, "--ragged: no dense control cells");
  cmd->add_flag("--train", a->train,
                "--ragged: the training step (forward, backward, Adam update) of the layer under its "
                "pooled classifier (the model's entry `loss`) beside PyTorch's padded and sorted "
                "(gradient-accumulation) training; --out defaults to bench/results/ragged-train, "
                "--batch to 32,64; no dense control cells");
  return {cmd, [a, cmd] {
            a->given_batch = cmd->count("--batch") > 0;
            a->given_threads = cmd->count("--threads") > 0;
            a->given_engine = cmd->count("--engine") > 0;
            a->given_out = cmd->count("--out") > 0;
            a->given_reps = cmd->count("--reps") > 0;
            return bench(*a);
          }};
}

}  // namespace acrobat::cli
