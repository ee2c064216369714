// The acrobat command line: run, check and emit models.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <new>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli_options.h"
#include "serve.h"
#include "io/files.h"
#include "io/safetensors.h"
#include "analysis/explain.h"
#include "codegen/build.h"
#include "codegen/emit_cpp.h"
#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/inputs.h"
#include "bench.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/thread_pool.h"
#include "engines/reference_engine.h"
#include "engines/train.h"
#include "io/ptb.h"

namespace {

using namespace acrobat;
using cli::parse_disable;
using cli::parse_sets;

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
  size_t limit = 0;  // 0: every instance (--limit itself takes 1 or more)
  std::string output;
  std::optional<size_t> show;
  std::string entry = "main";
  std::string emit;  // "ast" or "ir": print that stage instead of running
  std::string engine = "batched";
  std::string scheduler = "inline-depth";
  size_t batch = 64;
  bool block_stats = false;
  std::vector<std::string> disable;  // analyses switched off (ablation)
  int threads = 0;                   // threads per kernel (0: every core)
  std::string object;                // aot: a prebuilt shared object
};

// The numeric options of run and bench as given, checked and converted by read_numbers: CLI11 would
// wrap `--batch -1` to 2^64-1 and take `--threads 100000` as given.
struct NumberArgs {
  std::string seed, limit, show, batch, threads;
};

void read_numbers(const NumberArgs& a, RunOptions& o) {
  if (!a.seed.empty()) o.seed = cli::parse_seed("--seed", a.seed);
  if (!a.limit.empty()) o.limit = cli::parse_number("--limit", a.limit, 1, cli::kMaxCount);
  if (!a.show.empty()) o.show = cli::parse_number("--show", a.show, 0, cli::kMaxCount);
  if (!a.batch.empty()) o.batch = cli::parse_number("--batch", a.batch, 0, cli::kMaxBatch);
  if (!a.threads.empty())
    o.threads = static_cast<int>(cli::parse_number("--threads", a.threads, 1, cli::kMaxThreads));
}

// A compiled model with its parameters and input instances: what run and bench start from.
struct Prepared {
  std::shared_ptr<const ir::Module> module;
  std::shared_ptr<const ParamStore> params;
  std::vector<Value> inputs;
  InputSpec spec;
  std::string vocab;
  Type output_type;
};

// `with_inputs` false (serve): the model and its params only.
Prepared prepare(const RunOptions& o, bool with_inputs = true) {
  Prepared p;
  CompileOptions copts;
  copts.dims = parse_sets(o.sets);
  copts.analysis = parse_disable(o.disable);
  if (with_inputs && o.input.empty()) throw UserError("--input KIND:FILE is required");
  p.module = compile_model(o.model, copts);
  check_entry(*p.module->source, o.entry);
  int entry = entry_function(*p.module, o.entry);
  const ir::Function& f = p.module->functions[entry];
  p.output_type = f.ret;
  if (with_inputs) p.spec = parse_input_spec(o.input);
  if (with_inputs) {
    p.vocab = o.vocab.empty() ? default_vocab(p.spec) : o.vocab;
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

// Prints a stage of the compiler: `ast` (the checked syntax tree), `ir` (after lowering), or the IR
// after a later pass (`specialise`, `reuse`, `concurrent`), or the blocks and their plan (`blocks`),
// or the depth plan (`depth`), or the IR with its dups and drops of lazy tensors (`ownership`).
int emit(const std::string& model, const std::vector<std::string>& sets, const std::string& stage,
         const std::vector<std::string>& disable = {}) {
  CompileOptions options;
  options.dims = parse_sets(sets);
  options.analysis = parse_disable(disable);
  options.print_after = stage == "ast" ? "parse" : stage == "ir" ? "lower" : stage;
  options.dump = &std::cout;
  compile_model(model, options);
  return 0;
}

int explain_command(const std::string& model, const std::vector<std::string>& sets,
                    const std::vector<std::string>& disable) {
  CompileOptions options;
  options.dims = parse_sets(sets);
  options.analysis = parse_disable(disable);
  auto module = compile_model(model, options);
  std::cout << model << "\n" << analysis::explain(*module);
  return 0;
}

// `acrobat compile`: analyses, C++ generation, the system compiler; each timed.
int compile_command(const std::string& model, const std::vector<std::string>& sets,
                    const std::vector<std::string>& disable, const std::string& output,
                    const std::string& cache_dir, const std::string& emit_cpp_path) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  CompileOptions options;
  options.dims = parse_sets(sets);
  options.analysis = parse_disable(disable);
  auto t0 = Clock::now();
  auto module = compile_model(model, options);
  double analysis_seconds = since(t0);
  auto t1 = Clock::now();
  codegen::GeneratedCpp code = codegen::emit_cpp(*module);
  double generate_seconds = since(t1);
  if (!emit_cpp_path.empty()) io::write_file(emit_cpp_path, code.source);
  codegen::BuiltObject built = codegen::build_shared_object(code, cache_dir);
  std::error_code ec;
  std::filesystem::copy_file(built.path, output, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) throw UserError("cannot write " + output + ": " + ec.message());
  std::cout << fmt::format(
      "{}: {} static blocks, {} lines of C++ (code {}); parse+check+analyses {:.3f} s, C++ "
      "generation {:.3f} s, system compiler {}\n",
      output, module->plan->blocks.size(), std::count(code.source.begin(), code.source.end(), '\n'),
      code.hash, analysis_seconds, generate_seconds,
      built.cached ? std::string("not run (cached)") : fmt::format("{:.2f} s", built.seconds));
  return 0;
}

// The engine --engine names, on the prepared model.
std::unique_ptr<Engine> make_engine(const RunOptions& o, const Prepared& p) {
  if (o.engine == "reference") return std::make_unique<ReferenceEngine>(p.module, p.params);
  if (o.engine == "aot") {
    AotOptions ao;
    ao.object = o.object;
    ao.threads = o.threads > 0 ? o.threads : default_threads();
    ao.scheduler = parse_scheduler(o.scheduler);
    auto aot = std::make_unique<AotEngine>(p.module, p.params, ao);
    const AotBuildInfo& info = aot->build_info();
    std::cerr << fmt::format("note: compiled model {} ({}, loaded in {:.3f} s; {} threads)\n",
                             info.object_path,
                             !o.object.empty() ? "given"
                             : info.cached     ? "from the cache"
                                               : fmt::format("built in {:.1f} s", info.compile_seconds),
                             info.generate_seconds + info.load_seconds, ao.threads);
    return aot;
  }
  return std::make_unique<BatchedEngine>(p.module, p.params, parse_scheduler(o.scheduler),
                                         o.threads > 0 ? o.threads : default_threads());
}

int run_command(const RunOptions& o) {
  if (!o.emit.empty()) return emit(o.model, o.sets, o.emit, o.disable);
  Prepared p = prepare(o);
  const auto& params = p.params;
  const auto& inputs = p.inputs;
  const Type& output_type = p.output_type;
  std::unique_ptr<Engine> engine = make_engine(o, p);
  // Batches of --batch instances, one engine run each; the reference engine takes them all.
  RunResult result =
      engine->run_batches(inputs, o.engine == "reference" ? 0 : o.batch, o.entry);

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
        "  {} nodes ({} shared) in {} batches (mean batch size {:.1f}); host+graph {:.3f} s, scheduling "
        "{:.3f} s, kernels {:.3f} s (overhead {:.1f}%); peak memory {:.1f} MiB\n",
        s.nodes, s.shared_nodes, s.batches, s.mean_batch_size(), s.host_seconds, s.schedule_seconds,
        s.kernel_seconds, 100 * s.overhead_fraction(), s.peak_bytes / 1048576.0);
  if (o.block_stats)
    for (const auto& [name, c] : s.blocks)
      std::cout << fmt::format("  block at {}: {} nodes in {} batches (mean batch size {:.1f})\n", name,
                               c.nodes, c.batches, double(c.nodes) / double(c.batches));
  return 0;
}

// `acrobat grad`: the gradient of the summed loss of every instance, written as safetensors under
// the params' names (the file --params reads), and the loss.
int grad_command(const RunOptions& o, const std::string& out_path) {
  Prepared p = prepare(o);
  loss_function(*p.module, o.entry);
  std::unique_ptr<Engine> engine = make_engine(o, p);
  GradResult g = engine->gradients(p.inputs, o.entry);
  double total = 0;
  for (const Value& v : g.outputs) total += v.tensor->data[0];
  std::vector<const Tensor*> tensors;
  double norm = 0;
  for (const Tensor& t : g.grads) {
    for (int64_t j = 0; j < t.size(); ++j) norm += double(t.data[j]) * double(t.data[j]);
    tensors.push_back(&t);
  }
  if (!out_path.empty())
    write_param_tensors(*p.module, tensors, out_path,
                        {{"loss_sum", fmt::format("{:.9g}", total)}, {"instances", std::to_string(g.outputs.size())}});
  std::cout << fmt::format("{} instances: loss sum {:.6g} (mean {:.6g}); gradient norm {:.6g} ({} engine, "
                           "{:.3f} s){}\n",
                           g.outputs.size(), total, total / double(std::max<size_t>(1, g.outputs.size())),
                           std::sqrt(norm), engine->name(), g.stats.wall_seconds,
                           out_path.empty() ? "" : "; wrote " + out_path);
  return 0;
}

// `acrobat serve`: the model behind HTTP with a dynamic batcher (serve.h).
int serve_main(const RunOptions& o, ServeOptions so) {
  Prepared p = prepare(o, false);
  so.entry = o.entry;
  so.name = std::filesystem::path(o.model).stem().string();
  const ServeCores cores = ServeCores::split(o.threads > 0 ? o.threads : default_threads(), so.pin);
  cores.enter_engine();  // the engine's pool starts on the engine's cores
  std::unique_ptr<Engine> engine = make_engine(o, p);
  return serve_command(so, *p.module, *engine, cores);
}

// `acrobat train`: epochs of batched gradients and optimiser steps on the loss entry, the dev set's
// accuracy (SST: the root's label against the argmax of the predicting entry) and mean loss after
// each epoch, a checkpoint after each epoch, the test set at the end; a JSON log and a PNG of the
// curves.
struct TrainCommand {
  RunOptions run;  // model, --input (the training set), params, engine, threads, sets, limit, seed
  std::string dev, test, out, log, plot, predict = "main";
  std::string epochs = "1", dev_limit;
  OptimizerOptions opt;
  bool quiet = false;
};

int train_command(TrainCommand& t) {
  RunOptions& o = t.run;
  const int epochs = static_cast<int>(cli::parse_number("--epochs", t.epochs, 1, 100000));
  const size_t dev_limit = t.dev_limit.empty() ? 0 : cli::parse_number("--dev-limit", t.dev_limit, 1, cli::kMaxCount);
  check_optimizer(t.opt);
  if (o.batch == 0) throw UserError("--batch: training needs batches of at least one instance");
  Prepared p = prepare(o);  // the training set, read for the loss entry
  loss_function(*p.module, o.entry);
  // Trained in place: the engine computes with the params the optimiser updates.
  auto params = std::make_shared<ParamStore>(make_params(*p.module, copy_tensors(*p.params), p.params->source));
  p.params = params;
  std::unique_ptr<Engine> engine = make_engine(o, p);

  // A held-out set: the predicting entry's inputs and labels (SST roots) for accuracy, and the loss
  // entry's inputs for the mean loss.
  struct Held {
    std::string name;
    std::vector<Value> predict, loss;
    std::vector<int> labels;
  };
  auto read_held = [&](const std::string& name, const std::string& spec_text, size_t limit) {
    Held h{name, {}, {}, {}};
    if (spec_text.empty()) return h;
    const InputSpec spec = parse_input_spec(spec_text);
    const std::string vocab = o.vocab.empty() ? default_vocab(spec) : o.vocab;
    auto function = [&](const std::string& entry) -> const ir::Function& {
      return p.module->functions[entry_function(*p.module, entry)];
    };
    auto input_type = [](const ir::Function& f) { return f.vars[f.params[0]].type; };
    SizeNamesScope names(p.module->plan->size_names);
    h.loss = load_inputs(spec, input_type(function(o.entry)), vocab, limit);
    if (spec.kind == InputKind::Sst) {
      const ir::Function& f = function(t.predict);
      if (f.ret->kind != TypeKind::Tensor || is_ragged(f.ret->shape))
        throw UserError(f.span.begin, "--predict '" + t.predict + "' returns " + type_str(f.ret) +
                                          "; the accuracy needs a tensor of scores, one per class");
      h.predict = load_inputs(spec, input_type(f), vocab, limit);
      for (const io::PtbTree& tree : io::read_ptb_file(spec.path)) {
        if (h.labels.size() == h.predict.size()) break;
        h.labels.push_back(tree.label);
      }
    }
    return h;
  };
  const Held dev = read_held("dev", t.dev, dev_limit), test = read_held("test", t.test, 0);
  auto evaluate = [&](const Held& h, nlohmann::json& row) {
    if (h.loss.empty()) return std::string();
    double sum = 0;
    for (const Value& v : engine->run_batches(h.loss, o.batch, o.entry).outputs) sum += v.tensor->data[0];
    const double loss = sum / double(h.loss.size());
    row[h.name + "_loss"] = loss;
    std::string out = fmt::format("{} loss {:.4f}", h.name, loss);
    if (!h.predict.empty()) {
      const double acc = accuracy(*engine, h.predict, h.labels, t.predict, o.batch);
      row[h.name + "_accuracy"] = acc;
      out += fmt::format(", {} accuracy {:.2f}% ({} trees)", h.name, 100 * acc, h.predict.size());
    }
    return out;
  };

  nlohmann::json log{{"model", o.model},
                     {"engine", engine->name()},
                     {"train", o.input},
                     {"instances", p.inputs.size()},
                     {"batch", o.batch},
                     {"seed", o.seed},
                     {"optimizer", {{"kind", t.opt.kind}, {"lr", t.opt.lr}, {"momentum", t.opt.momentum},
                                    {"weight_decay", t.opt.weight_decay}, {"clip", t.opt.clip_norm}}},
                     {"epochs", nlohmann::json::array()},
                     {"batch_losses", nlohmann::json::array()}};
  Optimizer optimizer(t.opt, *params, o.threads > 0 ? o.threads : default_threads());
  std::mt19937_64 rng(o.seed);
  nlohmann::json start_row = nlohmann::json::object();
  if (!dev.loss.empty()) std::cout << "before training: " << evaluate(dev, start_row) << "\n" << std::flush;
  const bool bar = !t.quiet && isatty(2);
  for (int e = 1; e <= epochs; ++e) {
    // The bar redraws itself on a terminal, at most every 0.2 s.
    double drawn = -1;
    auto progress = [&](size_t done, double loss, double seconds) {
      if (!bar || (seconds - drawn < 0.2 && done < p.inputs.size())) return;
      drawn = seconds;
      const size_t n = p.inputs.size(), width = 30, filled = n ? width * done / n : width;
      std::cerr << fmt::format("\repoch {}/{} [{}{}] {}/{} {:.1f} inst/s, loss {:.4f}", e, epochs,
                               std::string(filled, '#'), std::string(width - filled, '.'), done, n,
                               seconds > 0 ? double(done) / seconds : 0.0, loss)
                << std::flush;
    };
    EpochResult r = train_epoch(*engine, optimizer, *params, p.inputs, o.batch, rng, o.entry, progress);
    if (bar) std::cerr << "\n";
    nlohmann::json row{{"epoch", e}, {"train_loss", r.mean_loss}, {"seconds", r.seconds},
                       {"backward_seconds", r.backward_seconds}, {"update_seconds", r.update_seconds},
                       {"peak_bytes", r.peak_bytes},
                       {"instances_per_s", double(r.instances) / r.seconds}};
    for (double l : r.batch_losses) log["batch_losses"].push_back(l);
    std::string line = fmt::format(
        "epoch {}/{}: train loss {:.4f} ({} instances, {:.1f} s: backward {:.1f} s, updates {:.1f} s; {:.1f} inst/s{})",
        e, epochs, r.mean_loss, r.instances, r.seconds, r.backward_seconds, r.update_seconds,
        double(r.instances) / r.seconds,
        r.peak_bytes > 0 ? fmt::format("; peak memory {:.1f} MiB", double(r.peak_bytes) / (1 << 20)) : "");
    const std::string d = evaluate(dev, row);
    if (!d.empty()) line += "; " + d;
    if (!t.out.empty()) {
      write_checkpoint(*p.module, *params, t.out, {{"epoch", std::to_string(e)}, {"model", o.model}});
      line += "; wrote " + t.out;
    }
    std::cout << line << "\n" << std::flush;
    log["epochs"].push_back(row);
  }
  nlohmann::json test_row = nlohmann::json::object();
  const std::string te = evaluate(test, test_row);
  if (!te.empty()) {
    std::cout << "final: " << te << "\n";
    log["test"] = test_row;
  }
  if (!t.log.empty()) io::write_file(t.log, log.dump(1) + "\n");
  if (!t.plot.empty()) {
    if (t.log.empty()) throw UserError("--plot draws the --log file: give --log too");
    const std::string cmd = fmt::format("/usr/bin/python3 {} {} {}", io::shell_quote(std::string(ACROBAT_SOURCE_DIR) + "/scripts/plot_train.py"),
                                        io::shell_quote(t.log), io::shell_quote(t.plot));
    if (std::system(cmd.c_str()) != 0) std::cerr << "train: warning: the plot failed (" << cmd << ")\n";
  }
  return 0;
}

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

int bench(const RunOptions& o, const std::string& batches, const std::string& schedulers,
          const std::string& reps, const std::string& json, const std::string& pytorch_limit_arg,
          const std::string& engines, const std::string& threads, bool ablation,
          bool busy_neighbour) {
  // Every option is checked before the model is compiled and the inputs are read.
  std::vector<int64_t> batch_sizes = cli::parse_number_list("--batch", batches, 1, cli::kMaxBatch);
  std::vector<int64_t> thread_counts =
      cli::parse_number_list("--threads", threads, 1, cli::kMaxThreads);
  size_t pytorch_limit = cli::parse_number("--pytorch-limit", pytorch_limit_arg, 0, cli::kMaxCount);
  int repetitions = static_cast<int>(cli::parse_number("--reps", reps, 1, cli::kMaxReps));
  Prepared p = prepare(o);
  std::vector<BenchConfig> configs = {{"as given", p.module}};
  if (ablation) {
    // Each analysis off in turn, then all of them, each on its own compilation of the model.
    const std::vector<std::pair<std::string, std::vector<std::string>>> ablations = {
        {"all analyses", {}},
        {"no reuse analysis", {"reuse"}},
        {"no ghost operations", {"ghosts"}},
        {"no phases", {"phases"}},
        {"no concurrent calls", {"concurrent"}},
        {"no shared nodes", {"share"}},
        {"none", {"specialise", "reuse", "ghosts", "phases", "concurrent", "share"}}};
    configs.clear();
    for (const auto& [name, disabled] : ablations) {
      // From the same checked syntax tree: the inputs refer to its data type definitions.
      CompileOptions options;
      options.analysis = parse_disable(disabled);
      configs.push_back({name, compile_checked(p.module->source, options)});
    }
  }
  BenchOptions b;
  b.model = o.model;
  b.batches.assign(batch_sizes.begin(), batch_sizes.end());
  b.schedulers.clear();
  std::stringstream ss(schedulers);
  std::string item;
  while (std::getline(ss, item, ',')) b.schedulers.push_back(scheduler_name(parse_scheduler(item)));
  b.sets = o.sets;
  b.reps = repetitions;
  b.engines = split_engines(engines);
  b.threads.clear();
  for (int64_t t : thread_counts) b.threads.push_back(static_cast<int>(t));
  b.json_path = json;
  b.busy_neighbour = busy_neighbour;
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

// Prints "error: <message>" as one line.
void report_failure(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  std::cerr << "error: " << message << "\n";
}

}  // namespace

// The model file and its parameters (a safetensors file, or random from --seed): run, grad, serve.
void add_model_options(CLI::App* cmd, RunOptions& o, NumberArgs& numbers, const char* model_help = "Model file (.acr)") {
  cmd->add_option("model", o.model, model_help)->required();
  cmd->add_option("--params", o.params, "Parameters (safetensors); default: random from --seed");
  cmd->add_option("--seed", numbers.seed, "Seed for random parameters (default 0)");
}

int main(int argc, char** argv) {
  CLI::App app{"acrobat: an auto-batching compiler and runtime for dynamic deep learning"};
  app.require_subcommand(1);

  RunOptions run;
  NumberArgs run_numbers;
  // What `emit` (and `run --emit`) can print: ast and ir name the parse and lower stages.
  const std::vector<std::string> emit_stages = {"ast", "ir", "specialise", "reuse", "concurrent",
                                                "blocks", "depth", "ownership"};
  auto* run_cmd = app.add_subcommand("run", "Run a model's `main` on every input instance");
  add_model_options(run_cmd, run, run_numbers);
  run_cmd->add_option("--input", run.input, "KIND:FILE with KIND sst, sst-tokens, tokens, json or lengths");
  run_cmd->add_option("--vocab", run.vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  const char* set_help = "Override dims: NAME=VALUE (repeatable, or comma-separated)";
  run_cmd->add_option("--set", run.sets, set_help)->delimiter(',');
  run_cmd->add_option("--limit", run_numbers.limit, "Run only the first N instances (N >= 1)");
  run_cmd->add_option("--output", run.output, "Write all outputs as JSON to this file");
  run_cmd->add_option("--show", run_numbers.show, "Print the first N outputs (default: all, or none with --output)");
  run_cmd->add_option("--entry", run.entry, "Function to run (default main)");
  run_cmd->add_option("--engine", run.engine,
                      "batched (default; the interpreter drives the batched runtime), aot (compiled "
                      "C++, cached) or reference (one instance at a time)")
      ->check(CLI::IsMember({"batched", "aot", "reference"}));
  run_cmd->add_option("--threads", run_numbers.threads,
                      "Threads splitting each large batched kernel, 1 to 1024 (default: all cores)");
  run_cmd->add_option("--object", run.object, "aot: use this shared object from `acrobat compile`");
  run_cmd->add_option("--scheduler", run.scheduler, "inline-depth (default), depth or agenda")
      ->check(CLI::IsMember({"inline-depth", "depth", "agenda"}));
  run_cmd->add_option("--batch", run_numbers.batch,
                      "Instances per batch, up to 1048576 (default 64; 0: all at once)");
  run_cmd->add_flag("--block-stats", run.block_stats, "Print nodes and batches per block");
  run_cmd->add_option("--emit", run.emit, "Print a compiler stage instead of running (see emit)")
      ->check(CLI::IsMember(emit_stages));
  const char* disable_help =
      "Switch analyses off for ablation: specialise, reuse, clone, ghosts, phases, concurrent, "
      "release, share (comma-separated)";
  run_cmd->add_option("--disable", run.disable, disable_help)->delimiter(',');

  RunOptions grad;
  grad.entry = "loss";
  NumberArgs grad_numbers;
  std::string grad_out;
  auto* grad_cmd = app.add_subcommand(
      "grad", "Gradient of the summed loss (the entry's output, one number per instance) with respect to "
              "every param, all instances in one batch; written as safetensors under the params' names");
  add_model_options(grad_cmd, grad, grad_numbers);
  grad_cmd->add_option("--input", grad.input, "KIND:FILE, as for run (sst gives LabelledTree to a loss on them)");
  grad_cmd->add_option("--vocab", grad.vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  grad_cmd->add_option("--set", grad.sets, set_help)->delimiter(',');
  grad_cmd->add_option("--limit", grad_numbers.limit, "Use only the first N instances (N >= 1)");
  grad_cmd->add_option("--entry", grad.entry, "The loss function (default loss)");
  grad_cmd->add_option("--out", grad_out, "Write the gradients to this safetensors file");
  grad_cmd->add_option("--engine", grad.engine, "batched (default), aot or reference")
      ->check(CLI::IsMember({"batched", "aot", "reference"}));
  grad_cmd->add_option("--threads", grad_numbers.threads, "Threads of the forward run, 1 to 1024 (default: all cores)");

  RunOptions serve;
  NumberArgs serve_numbers;
  ServeOptions serve_opts;
  std::string serve_port = "8500", serve_max_batch = "64", serve_delay = "0", serve_http_threads;
  bool serve_no_pin = false;
  auto* serve_cmd = app.add_subcommand(
      "serve", "Serve a model over HTTP (TensorFlow Serving / KServe v1 REST: POST /v1/models/NAME:predict "
               "{\"instances\": [...]}), batching concurrent requests; /health, /metrics; stops on SIGINT/SIGTERM");
  add_model_options(serve_cmd, serve, serve_numbers, "Model file (.acr); NAME is its stem");
  serve_cmd->add_option("--set", serve.sets, set_help)->delimiter(',');
  serve_cmd->add_option("--entry", serve.entry, "Function to serve (default main)");
  serve_cmd->add_option("--engine", serve.engine, "batched (default) or aot")
      ->check(CLI::IsMember({"batched", "aot"}));
  serve_cmd->add_option("--threads", serve_numbers.threads, "Threads splitting each large batched kernel (default: all cores)");
  serve_cmd->add_option("--host", serve_opts.host, "Address to listen on (default 127.0.0.1)");
  serve_cmd->add_option("--port", serve_port, "Port (default 8500; 0: any free port, printed)");
  serve_cmd->add_option("--max-batch", serve_max_batch, "Most instances per engine run (default 64)");
  serve_cmd->add_option("--max-delay-ms", serve_delay,
                        "Longest the oldest queued instance waits for a fuller batch, ms (default 0: a batch of what is queued runs as soon as the engine is free)");
  serve_cmd->add_flag("--no-pin", serve_no_pin,
                      "Leave every thread on every core (default: when there are more cores than --threads, "
                      "the engine keeps the first --threads cores to itself and HTTP gets the rest)");
  serve_cmd->add_option("--http-threads", serve_http_threads,
                        "Connections served at once (default: 2 * max-batch + 8)");

  TrainCommand train;
  train.run.entry = "loss";
  train.run.batch = 25;
  NumberArgs train_numbers;
  auto* train_cmd = app.add_subcommand(
      "train", "Train a model: batched gradients of its loss entry, an optimiser step per batch, the dev set "
               "after each epoch, a checkpoint, the test set at the end");
  train_cmd->add_option("model", train.run.model, "Model file (.acr)")->required();
  train_cmd->add_option("--input", train.run.input, "KIND:FILE, the training set (sst gives LabelledTree values)");
  train_cmd->add_option("--dev", train.dev, "KIND:FILE evaluated after each epoch (sst: accuracy of the root)");
  train_cmd->add_option("--test", train.test, "KIND:FILE evaluated at the end");
  train_cmd->add_option("--vocab", train.run.vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  train_cmd->add_option("--params", train.run.params, "Initial parameters (safetensors); default: random from --seed");
  train_cmd->add_option("--seed", train_numbers.seed, "Seed of the initial parameters and of the order of the instances");
  train_cmd->add_option("--set", train.run.sets, set_help)->delimiter(',');
  train_cmd->add_option("--limit", train_numbers.limit, "Train on the first N instances only");
  train_cmd->add_option("--dev-limit", train.dev_limit, "Evaluate the first N dev instances only");
  train_cmd->add_option("--epochs", train.epochs, "Epochs (default 1)");
  train_cmd->add_option("--batch", train_numbers.batch, "Instances per gradient step (default 25)");
  train_cmd->add_option("--loss", train.run.entry, "The loss function (default loss)");
  train_cmd->add_option("--predict", train.predict, "The function whose argmax is compared with the labels (default main)");
  train_cmd->add_option("--optimizer", train.opt.kind, "adam (default) or sgd");
  train_cmd->add_option("--lr", train.opt.lr, "Learning rate (default 1e-3)");
  train_cmd->add_option("--momentum", train.opt.momentum, "SGD momentum (default 0.9)");
  train_cmd->add_option("--weight-decay", train.opt.weight_decay, "L2 weight decay added to the gradient (default 0)");
  train_cmd->add_option("--clip", train.opt.clip_norm, "Clip the gradient to this global norm (default 0: none)");
  train_cmd->add_option("--engine", train.run.engine, "batched (default), aot or reference")
      ->check(CLI::IsMember({"batched", "aot", "reference"}));
  train_cmd->add_option("--threads", train_numbers.threads, "Threads of the forward runs, 1 to 1024 (default: all cores)");
  train_cmd->add_option("--out", train.out, "Checkpoint (safetensors, the names --params reads) after each epoch");
  train_cmd->add_option("--log", train.log, "Write the losses and accuracies as JSON");
  train_cmd->add_option("--plot", train.plot, "Draw the --log curves as a PNG");
  train_cmd->add_flag("--quiet", train.quiet, "No progress bar");

  std::string emit_stage, emit_model;
  std::vector<std::string> emit_sets;
  std::vector<std::string> emit_disable;
  auto* emit_cmd = app.add_subcommand("emit", "Print a stage of the compiler");
  emit_cmd
      ->add_option("stage", emit_stage,
                   "ast (checked syntax tree), ir (A-normal form), specialise, reuse or concurrent "
                   "(the IR after that pass), blocks (static blocks and their plan), depth (chain "
                   "lengths, ghost operations and phase ends), ownership (the IR with the dups and "
                   "drops of lazy tensors)")
      ->required()
      ->check(CLI::IsMember(emit_stages));
  emit_cmd->add_option("model", emit_model, "Model file (.acr)")->required();
  emit_cmd->add_option("--set", emit_sets, set_help)->delimiter(',');
  emit_cmd->add_option("--disable", emit_disable, disable_help)->delimiter(',');

  std::string compile_model_path, compile_output, compile_cache;
  std::vector<std::string> compile_sets, compile_disable;
  auto* compile_cmd = app.add_subcommand(
      "compile", "Compile a model ahead of time to a shared object (C++ host program and batched "
                 "kernels, built with the system compiler, cached by content)");
  compile_cmd->add_option("model", compile_model_path, "Model file (.acr)")->required();
  compile_cmd->add_option("-o,--output", compile_output, "The shared object to write")->required();
  compile_cmd->add_option("--set", compile_sets, set_help)->delimiter(',');
  compile_cmd->add_option("--disable", compile_disable, disable_help)->delimiter(',');
  compile_cmd->add_option("--cache-dir", compile_cache, "Compile cache (default ~/.cache/acrobat)");
  std::string emit_cpp_path;
  compile_cmd->add_option("--emit-cpp", emit_cpp_path, "Also write the generated C++ to this file");

  std::string explain_model;
  std::vector<std::string> explain_sets, explain_disable;
  auto* explain_cmd = app.add_subcommand(
      "explain", "What the compiler decided: per function its clones and specialisations, per "
                 "static block its operators, argument modes, depth, phase and FLOPs");
  explain_cmd->add_option("model", explain_model, "Model file (.acr)")->required();
  explain_cmd->add_option("--set", explain_sets, set_help)->delimiter(',');
  explain_cmd->add_option("--disable", explain_disable, disable_help)->delimiter(',');

  std::string check_model, check_entry_name = "main";
  std::vector<std::string> check_sets;
  auto* check_cmd = app.add_subcommand("check", "Parse and type-check a model; report every error");
  check_cmd->add_option("model", check_model, "Model file (.acr)")->required();
  check_cmd->add_option("--set", check_sets, set_help)->delimiter(',');
  check_cmd->add_option("--entry", check_entry_name, "The function `run` would start from (default main)");

  RunOptions bench_opts;
  std::string bench_batches = "1,8,64", bench_schedulers = "inline-depth,depth,agenda", bench_json;
  std::string bench_reps = "3", bench_pytorch = "300";
  NumberArgs bench_numbers;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Throughput of the reference engine, the batched engine (each scheduler and batch "
               "size) and eager PyTorch, side by side, with the sgemm yardstick");
  bench_cmd->add_option("model", bench_opts.model, "Model file (.acr); not with --all");
  bench_cmd->add_option("--input", bench_opts.input, "KIND:FILE; not with --all");
  bench_cmd->add_option("--vocab", bench_opts.vocab, "Vocabulary for sst inputs");
  bench_cmd->add_option("--set", bench_opts.sets, set_help)->delimiter(',');
  bench_cmd->add_option("--limit", bench_numbers.limit, "Use only the first N instances (N >= 1)");
  bench_cmd->add_option("--disable", bench_opts.disable, disable_help)->delimiter(',');
  std::string bench_engines = "batched", bench_threads = "1";
  bench_cmd->add_option("--engine", bench_engines, "Engines besides the reference: batched, aot or batched,aot");
  bench_cmd->add_option("--threads", bench_threads,
                        "Thread counts from 1 to 1024, comma-separated (default 1)");
  bool bench_ablation = false, bench_all = false, bench_quick = false, bench_busy = false;
  std::string bench_out = "bench/results/all";
  bench_cmd->add_flag("--all", bench_all,
                      "Every model of models/ at its sizes on its data with the oracle's weights "
                      "(the other options but --reps are ignored): all.md, all.json, all.png");
  bench_cmd->add_option("--out", bench_out, "--all: output directory (default bench/results/all)");
  bench_cmd->add_flag("--quick", bench_quick, "--all: small sizes, few instances, one repetition");
  bench_cmd->add_flag("--ablation", bench_ablation,
                      "Rows for each analysis switched off in turn and for all off (ignores --disable)");
  bench_cmd->add_flag("--busy-neighbour", bench_busy,
                      "Keep one core busy with another process while the rows run (how the "
                      "threads fare when the machine is shared)");
  bench_cmd->add_option("--params", bench_opts.params, "Parameters (default: random, seed 0)");
  bench_cmd->add_option("--batch", bench_batches, "Batch sizes, comma-separated (default 1,8,64)");
  bench_cmd->add_option("--schedulers", bench_schedulers, "Schedulers, comma-separated");
  bench_cmd->add_option("--reps", bench_reps, "Repetitions per figure, 1 to 1000 (median; default 3)");
  bench_cmd->add_option("--json", bench_json, "Write the results as JSON to this file");
  bench_cmd->add_option("--pytorch-limit", bench_pytorch,
                        "Instances for the eager PyTorch row (default 300; 0: no PyTorch row)");
  bool bench_ragged = false, bench_no_pytorch = false, bench_no_dense = false;
  std::vector<std::string> bench_lengths;
  std::string bench_cell_batches = "2";
  bench_cmd->add_flag("--ragged", bench_ragged,
                      "The encoder layer (default models/encoder.acr) on the length files of "
                      "data/lengths, beside PyTorch's padded, sorted and nested strategies: "
                      "ragged.json, ragged.md, ragged.png in --out (default bench/results/ragged); "
                      "--batch defaults to 32,64,128, --threads to 1,2, --engine to aot,batched");
  bench_cmd->add_option("--lengths", bench_lengths,
                        "--ragged: length files, names in data/lengths or paths (default: all)")
      ->delimiter(',');
  bench_cmd->add_option("--batches", bench_cell_batches,
                        "--ragged: batches per cell, 1 to 1000 (default 2)");
  bench_cmd->add_flag("--no-pytorch", bench_no_pytorch, "--ragged: acrobat's rows only");
  bench_cmd->add_flag("--no-dense", bench_no_dense, "--ragged: no dense control cells");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); every command-line error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }

  // Every exception ends as one message and exit status 1: user errors as they are, the others
  // (out of memory, the file system, the system, JSON) named for what they are.
  try {
    if (*run_cmd) {
      read_numbers(run_numbers, run);
      return run_command(run);
    }
    if (*train_cmd) {
      read_numbers(train_numbers, train.run);
      return train_command(train);
    }
    if (*grad_cmd) {
      read_numbers(grad_numbers, grad);
      return grad_command(grad, grad_out);
    }
    if (*serve_cmd) {
      read_numbers(serve_numbers, serve);
      serve_opts.port = static_cast<int>(cli::parse_number("--port", serve_port, 0, 65535));
      serve_opts.max_batch = cli::parse_number("--max-batch", serve_max_batch, 1, cli::kMaxBatch);
      serve_opts.max_delay_ms = static_cast<double>(cli::parse_number("--max-delay-ms", serve_delay, 0, 60000));
      serve_opts.pin = !serve_no_pin;
      if (!serve_http_threads.empty())
        serve_opts.http_threads = static_cast<int>(cli::parse_number("--http-threads", serve_http_threads, 1, 4096));
      return serve_main(serve, serve_opts);
    }
    read_numbers(bench_numbers, bench_opts);
    if (*bench_cmd && bench_all) {
      BenchAllOptions a;
      a.source_dir = ACROBAT_SOURCE_DIR;
      a.out_dir = bench_out;
      a.reps = static_cast<int>(cli::parse_number("--reps", bench_reps, 1, cli::kMaxReps));
      a.quick = bench_quick;
      return bench_all_command(a);
    }
    if (*bench_cmd && bench_ragged) {
      BenchRaggedOptions r;
      r.source_dir = ACROBAT_SOURCE_DIR;
      r.model = bench_opts.model.empty() ? r.source_dir + "/models/encoder.acr" : bench_opts.model;
      r.params = bench_opts.params;
      r.lengths = bench_lengths;
      const bool given_batch = bench_cmd->count("--batch") > 0, given_threads = bench_cmd->count("--threads") > 0;
      if (given_batch) {
        r.batches.clear();
        for (int64_t b : cli::parse_number_list("--batch", bench_batches, 1, cli::kMaxBatch))
          r.batches.push_back(static_cast<size_t>(b));
      }
      if (given_threads) {
        r.threads.clear();
        for (int64_t t : cli::parse_number_list("--threads", bench_threads, 1, cli::kMaxThreads))
          r.threads.push_back(static_cast<int>(t));
      }
      if (bench_cmd->count("--engine") > 0) r.engines = split_engines(bench_engines);
      if (bench_cmd->count("--out") > 0) r.out_dir = bench_out;
      r.json_path = bench_json;
      r.reps = static_cast<int>(cli::parse_number("--reps", bench_reps, 1, cli::kMaxReps));
      r.batches_per_cell = static_cast<int>(cli::parse_number("--batches", bench_cell_batches, 1, 1000));
      r.pytorch = !bench_no_pytorch;
      r.dense = !bench_no_dense;
      return bench_ragged_command(r);
    }
    if (*bench_cmd && bench_opts.model.empty())
      throw UserError("bench: a model file is required (or --all)");
    if (*bench_cmd)
      return bench(bench_opts, bench_batches, bench_schedulers, bench_reps, bench_json, bench_pytorch,
                   bench_engines, bench_threads, bench_ablation, bench_busy);
    if (*emit_cmd) return emit(emit_model, emit_sets, emit_stage, emit_disable);
    if (*explain_cmd) return explain_command(explain_model, explain_sets, explain_disable);
    if (*compile_cmd)
      return compile_command(compile_model_path, compile_sets, compile_disable, compile_output,
                             compile_cache, emit_cpp_path);
    if (*check_cmd) {
      CompileOptions options;
      options.dims = parse_sets(check_sets);
      auto module = compile_model(check_model, options);
      check_entry(*module->source, check_entry_name);
      std::cout << check_model << ": ok (" << module->functions.size() << " functions, "
                << module->params.size() << " params)\n";
      return 0;
    }
  } catch (const UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
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
