// The acrobat command line: run, check and emit models.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "io/files.h"
#include "ir/pipeline.h"
#include "lang/frontend.h"
#include "runtime/inputs.h"
#include "bench.h"
#include "runtime/batched_engine.h"
#include "runtime/reference_engine.h"

namespace {

using namespace acrobat;

DimOverrides parse_sets(const std::vector<std::string>& sets) {
  DimOverrides out;
  for (const auto& s : sets) {
    size_t eq = s.find('=');
    std::string name = s.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : s.substr(eq + 1);
    char* end = nullptr;
    long long v = value.empty() ? 0 : std::strtoll(value.c_str(), &end, 10);
    if (eq == std::string::npos || name.empty() || value.empty() || *end != '\0' || v <= 0)
      throw UserError("--set '" + s + "': expected NAME=VALUE with a positive integer VALUE");
    out[name] = v;
  }
  return out;
}

// The vocabulary beside the data file (data/sst/vocab.txt for data/sst/test.txt), if there is one.
std::string default_vocab(const InputSpec& spec) {
  if (spec.kind != InputKind::Sst && spec.kind != InputKind::SstTokens) return "";
  size_t slash = spec.path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : spec.path.substr(0, slash + 1);
  std::string candidate = dir + "vocab.txt";
  return std::ifstream(candidate).good() ? candidate : "";
}

std::string brief(const Value& v, const Type& type) {
  if (v.kind == Value::Kind::Tensor && v.tensor->shape.size() == 2 && v.tensor->shape[0] == 1) {
    const float* p = v.tensor->data.get();
    int64_t n = v.tensor->shape[1];
    int64_t best = 0;
    std::string values;
    for (int64_t i = 0; i < n; ++i) {
      if (p[i] > p[best]) best = i;
      if (i < 8) values += fmt::format("{}{:.4f}", i ? " " : "", p[i]);
    }
    if (n > 8) values += " ...";
    return fmt::format("argmax {}  [{}]", best, values);
  }
  std::string s = value_to_json(v, type).dump();
  return s.size() > 200 ? s.substr(0, 200) + " ..." : s;
}

struct RunOptions {
  std::string model;
  std::string params;
  uint64_t seed = 0;
  std::string input;
  std::string vocab;
  std::vector<std::string> sets;
  size_t limit = 0;
  std::string output;
  std::optional<size_t> show;
  std::string entry = "main";
  std::string emit;  // "ast" or "ir": print that stage instead of running
  std::string engine = "batched";
  std::string scheduler = "inline-depth";
  size_t batch = 64;
  bool block_stats = false;
};

// A compiled model with its parameters and input instances: what run and bench start from.
struct Prepared {
  std::shared_ptr<const ir::Module> module;
  std::shared_ptr<const ParamStore> params;
  std::vector<Value> inputs;
  InputSpec spec;
  std::string vocab;
  Type output_type;
};

Prepared prepare(const RunOptions& o) {
  Prepared p;
  CompileOptions copts;
  copts.dims = parse_sets(o.sets);
  if (o.input.empty()) throw UserError("--input KIND:FILE is required");
  p.module = compile_model(o.model, copts);
  int entry = entry_function(*p.module, o.entry);
  const ir::Function& f = p.module->functions[entry];
  p.output_type = f.ret;
  p.spec = parse_input_spec(o.input);
  p.vocab = o.vocab.empty() ? default_vocab(p.spec) : o.vocab;
  p.inputs = load_inputs(p.spec, f.vars[f.params[0]].type, p.vocab, o.limit);
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

// Prints the checked syntax tree (`ast`) or the IR (`ir`) of a model.
int emit(const std::string& model, const std::vector<std::string>& sets, const std::string& stage) {
  CompileOptions options;
  options.dims = parse_sets(sets);
  options.print_after = stage == "ast" ? "parse" : "lower";
  options.dump = &std::cout;
  compile_model(model, options);
  return 0;
}

int run_command(const RunOptions& o) {
  if (!o.emit.empty()) return emit(o.model, o.sets, o.emit);
  Prepared p = prepare(o);
  const auto& module = p.module;
  const auto& params = p.params;
  const auto& inputs = p.inputs;
  const Type& output_type = p.output_type;
  std::unique_ptr<Engine> engine;
  if (o.engine == "reference")
    engine = std::make_unique<ReferenceEngine>(module, params);
  else
    engine = std::make_unique<BatchedEngine>(module, params, parse_scheduler(o.scheduler));
  // Batches of --batch instances, one engine run each; the reference engine takes them all.
  RunResult result =
      run_in_batches(*engine, inputs, o.engine == "reference" ? 0 : o.batch, o.entry);

  if (!o.output.empty()) {
    nlohmann::json out;
    out["model"] = o.model;
    out["engine"] = engine->name();
    out["outputs"] = nlohmann::json::array();
    for (const auto& v : result.outputs) out["outputs"].push_back(value_to_json(v, output_type));
    io::write_file(o.output, out.dump() + "\n");
  }
  size_t show = o.show ? *o.show : (o.output.empty() ? result.outputs.size() : 0);
  for (size_t i = 0; i < result.outputs.size() && i < show; ++i)
    std::cout << fmt::format("#{:<5} {}\n", i, brief(result.outputs[i], output_type));
  const RunStats& s = result.stats;
  std::cout << fmt::format(
      "{} instances in {:.3f} s: {:.1f} instances/s, {:.2f} useful GFLOP/s ({} engine, {} kernel "
      "calls, params from {})\n",
      s.instances, s.wall_seconds, s.instances_per_second(), s.useful_gflops(), engine->name(),
      s.kernel_calls, params->source);
  if (s.nodes > 0)
    std::cout << fmt::format(
        "  {} nodes in {} batches (mean batch size {:.1f}); host+graph {:.3f} s, scheduling {:.3f} "
        "s, kernels {:.3f} s (overhead {:.1f}%); peak arena {:.1f} MiB\n",
        s.nodes, s.batches, s.mean_batch_size(), s.host_seconds, s.schedule_seconds,
        s.kernel_seconds, 100 * s.overhead_fraction(), s.peak_bytes / 1048576.0);
  if (o.block_stats)
    for (const auto& [name, c] : s.blocks)
      std::cout << fmt::format("  block at {}: {} nodes in {} batches (mean batch size {:.1f})\n", name,
                               c.nodes, c.batches, double(c.nodes) / double(c.batches));
  return 0;
}

std::vector<size_t> parse_batches(const std::string& list) {
  std::vector<size_t> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0)
      throw UserError("--batch '" + list + "': expected a comma-separated list of positive sizes");
    out.push_back(static_cast<size_t>(v));
  }
  return out;
}

int bench(const RunOptions& o, const std::string& batches, const std::string& schedulers,
          int reps, const std::string& json, size_t pytorch_limit) {
  Prepared p = prepare(o);
  BenchOptions b;
  b.model = o.model;
  b.batches = parse_batches(batches);
  b.schedulers.clear();
  std::stringstream ss(schedulers);
  std::string item;
  while (std::getline(ss, item, ',')) b.schedulers.push_back(scheduler_name(parse_scheduler(item)));
  b.sets = o.sets;
  b.reps = reps;
  b.json_path = json;
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
  return bench_command(b, p.module, p.params, p.inputs);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"acrobat: an auto-batching compiler and runtime for dynamic deep learning"};
  app.require_subcommand(1);

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Run a model's `main` on every input instance");
  run_cmd->add_option("model", run.model, "Model file (.acr)")->required();
  run_cmd->add_option("--params", run.params, "Parameters (safetensors); default: random from --seed");
  run_cmd->add_option("--seed", run.seed, "Seed for random parameters (default 0)");
  run_cmd->add_option("--input", run.input, "KIND:FILE with KIND sst, sst-tokens, tokens or json");
  run_cmd->add_option("--vocab", run.vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  run_cmd->add_option("--set", run.sets, "Override a dim: NAME=VALUE (repeatable)");
  run_cmd->add_option("--limit", run.limit, "Run only the first N instances");
  run_cmd->add_option("--output", run.output, "Write all outputs as JSON to this file");
  run_cmd->add_option("--show", run.show, "Print the first N outputs (default: all, or none with --output)");
  run_cmd->add_option("--entry", run.entry, "Function to run (default main)");
  run_cmd->add_option("--engine", run.engine, "batched (default) or reference (one instance at a time)")
      ->check(CLI::IsMember({"batched", "reference"}));
  run_cmd->add_option("--scheduler", run.scheduler, "inline-depth (default), depth or agenda")
      ->check(CLI::IsMember({"inline-depth", "depth", "agenda"}));
  run_cmd->add_option("--batch", run.batch, "Instances per batch (default 64; 0: all at once)");
  run_cmd->add_flag("--block-stats", run.block_stats, "Print nodes and batches per block");
  run_cmd->add_option("--emit", run.emit, "Print a compiler stage (ast or ir) instead of running")
      ->check(CLI::IsMember({"ast", "ir"}));

  std::string emit_stage, emit_model;
  std::vector<std::string> emit_sets;
  auto* emit_cmd = app.add_subcommand("emit", "Print a stage of the compiler: ast or ir");
  emit_cmd->add_option("stage", emit_stage, "ast (checked syntax tree) or ir (A-normal form)")
      ->required()
      ->check(CLI::IsMember({"ast", "ir"}));
  emit_cmd->add_option("model", emit_model, "Model file (.acr)")->required();
  emit_cmd->add_option("--set", emit_sets, "Override a dim: NAME=VALUE (repeatable)");

  std::string check_model;
  std::vector<std::string> check_sets;
  auto* check_cmd = app.add_subcommand("check", "Parse and type-check a model; report every error");
  check_cmd->add_option("model", check_model, "Model file (.acr)")->required();
  check_cmd->add_option("--set", check_sets, "Override a dim: NAME=VALUE (repeatable)");

  RunOptions bench_opts;
  std::string bench_batches = "1,8,64", bench_schedulers = "inline-depth,depth,agenda", bench_json;
  int bench_reps = 3;
  size_t bench_pytorch = 300;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Throughput of the reference engine, the batched engine (each scheduler and batch "
               "size) and eager PyTorch, side by side, with the sgemm yardstick");
  bench_cmd->add_option("model", bench_opts.model, "Model file (.acr)")->required();
  bench_cmd->add_option("--input", bench_opts.input, "KIND:FILE")->required();
  bench_cmd->add_option("--vocab", bench_opts.vocab, "Vocabulary for sst inputs");
  bench_cmd->add_option("--set", bench_opts.sets, "Override a dim: NAME=VALUE (repeatable)");
  bench_cmd->add_option("--limit", bench_opts.limit, "Use only the first N instances");
  bench_cmd->add_option("--params", bench_opts.params, "Parameters (default: random, seed 0)");
  bench_cmd->add_option("--batch", bench_batches, "Batch sizes, comma-separated (default 1,8,64)");
  bench_cmd->add_option("--schedulers", bench_schedulers, "Schedulers, comma-separated");
  bench_cmd->add_option("--reps", bench_reps, "Repetitions per figure (median; default 3)")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--json", bench_json, "Write the results as JSON to this file");
  bench_cmd->add_option("--pytorch-limit", bench_pytorch,
                        "Instances for the eager PyTorch row (default 300; 0: no PyTorch row)");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*run_cmd) return run_command(run);
    if (*bench_cmd)
      return bench(bench_opts, bench_batches, bench_schedulers, bench_reps, bench_json, bench_pytorch);
    if (*emit_cmd) return emit(emit_model, emit_sets, emit_stage);
    if (*check_cmd) {
      auto module = compile_model(check_model, CompileOptions{parse_sets(check_sets), "", nullptr});
      std::cout << check_model << ": ok (" << module->functions.size() << " functions, "
                << module->params.size() << " params)\n";
      return 0;
    }
  } catch (const UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
