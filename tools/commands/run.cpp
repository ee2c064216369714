// `acrobat run`: a model's entry on every input instance, in batches; outputs and run statistics.
#include <iostream>

#include <fmt/format.h>

#include "commands/command.h"
#include "commands/common.h"
#include "compiler/pipeline.h"
#include "io/files.h"

namespace acrobat::cli {

namespace {

// One output in a line: a [1, C] tensor as its argmax and first values, anything else as JSON.
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

void print_stats(const RunStats& s, const Engine& engine, const ParamStore& params, bool block_stats) {
  std::cout << fmt::format(
      "{} instances in {:.3f} s: {:.1f} instances/s, {:.2f} useful GFLOP/s ({} engine, {} kernel "
      "calls, params from {})\n",
      s.instances, s.wall_seconds, s.instances_per_second(), s.useful_gflops(), engine.name(),
      s.kernel_calls, params.source);
  if (s.nodes > 0)
    std::cout << fmt::format(
        "  {} nodes ({} shared) in {} batches (mean batch size {:.1f}); host+graph {:.3f} s, scheduling "
        "{:.3f} s, kernels {:.3f} s (overhead {:.1f}%); peak memory {:.1f} MiB\n",
        s.nodes, s.shared_nodes, s.batches, s.mean_batch_size(), s.host_seconds, s.schedule_seconds,
        s.kernel_seconds, 100 * s.overhead_fraction(), s.peak_bytes / 1048576.0);
  if (s.weight_gemm_flops > 0)
    std::cout << fmt::format("  ragged blocks' weight GEMMs: {:.3f} s, {:.1f} GFLOP/s\n", s.weight_gemm_seconds,
                             s.weight_gemm_gflops());
  if (s.appends_in_place > 0 || s.append_copied_floats > 0)
    std::cout << fmt::format("  appends: {} in place, {:.1f} MiB copied\n", s.appends_in_place,
                             double(s.append_copied_floats) * sizeof(float) / 1048576.0);
  if (block_stats)
    for (const auto& [name, c] : s.blocks)
      std::cout << fmt::format("  block at {}: {} nodes in {} batches (mean batch size {:.1f}), {:.3f} s\n", name,
                               c.nodes, c.batches, double(c.nodes) / double(c.batches), c.seconds);
}

int run(const RunOptions& o) {
  if (!o.emit.empty()) {
    CompileOptions options = compile_options(o.sets, o.disable);
    options.print_after = o.emit;
    options.dump = &std::cout;
    compile_model(o.model, options);
    return 0;
  }
  Prepared p = prepare(o);
  std::unique_ptr<Engine> engine = make_cli_engine(o, p);
  // Batches of --batch instances, one engine run each; the reference engine takes them all.
  RunResult result = run_batches(*engine, p.inputs, o.engine == "reference" ? 0 : o.batch, o.entry,
                                 parse_on_error(o.on_error));
  std::vector<uint8_t> skipped(result.outputs.size(), 0);  // null in --output, "skipped" when shown
  for (const InstanceFailure& f : result.failures) skipped[f.instance] = 1;

  if (!o.output.empty()) {
    nlohmann::json out;
    out["model"] = o.model;
    out["engine"] = engine->name();
    out["outputs"] = nlohmann::json::array();
    for (size_t i = 0; i < result.outputs.size(); ++i)
      out["outputs"].push_back(skipped[i] ? nlohmann::json() : value_to_json(result.outputs[i], p.output_type));
    if (!result.failures.empty()) {
      out["failures"] = nlohmann::json::array();
      for (const InstanceFailure& f : result.failures)
        out["failures"].push_back({{"instance", f.instance}, {"error", f.message}});
    }
    io::write_file(o.output, out.dump() + "\n");
  }
  size_t show = o.show ? *o.show : (o.output.empty() ? result.outputs.size() : 0);
  for (size_t i = 0; i < result.outputs.size() && i < show; ++i)
    std::cout << fmt::format("#{:<5} {}\n", i, skipped[i] ? "skipped" : brief(result.outputs[i], p.output_type));
  for (const InstanceFailure& f : result.failures) std::cerr << "skipped: " << f.message << "\n";
  if (!result.failures.empty())
    std::cerr << fmt::format("{} of {} instances skipped (--on-error skip)\n", result.failures.size(),
                             result.outputs.size());
  print_stats(result.stats, *engine, *p.params, o.block_stats);
  return 0;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto numbers = std::make_shared<NumberArgs>();
  auto* cmd = app.add_subcommand("run", "Run a model's `main` on every input instance");
  add_model_options(cmd, *o, *numbers);
  cmd->add_option("--input", o->input, "KIND:FILE with KIND sst, sst-tokens, tokens, json or lengths");
  cmd->add_option("--vocab", o->vocab, "Vocabulary for sst inputs (default: vocab.txt beside the data)");
  cmd->add_option("--set", o->sets, kSetHelp)->delimiter(',');
  cmd->add_option("--limit", numbers->limit, "Run only the first N instances (N >= 1)");
  cmd->add_option("--output", o->output, "Write all outputs as JSON to this file");
  cmd->add_option("--show", numbers->show, "Print the first N outputs (default: all, or none with --output)");
  cmd->add_option("--entry", o->entry, "Function to run (default main)");
  add_engine_option(cmd, o->engine,
                    "batched (default; the interpreter drives the batched runtime), aot (compiled "
                    "C++, cached) or reference (one instance at a time)");
  cmd->add_option("--threads", numbers->threads,
                  "Threads splitting each large batched kernel, 1 to 1024 (default: all cores)");
  cmd->add_option("--object", o->object, "aot: use this shared object from `acrobat compile`");
  cmd->add_option("--scheduler", o->scheduler, "inline-depth (default), depth or agenda")
      ->check(CLI::IsMember(scheduler_names()));
  cmd->add_option("--batch", numbers->batch, "Instances per batch, up to 1048576 (default 64; 0: all at once)");
  cmd->add_option("--on-error", o->on_error,
                  "An instance that fails (an index out of range, an empty list gathered, ...): raise (default: "
                  "the run fails) or skip (reported, the others' outputs kept)")
      ->check(CLI::IsMember({"raise", "skip"}));
  add_max_steps_option(cmd, *numbers, "0");
  cmd->add_flag("--block-stats", o->block_stats, "Print nodes and batches per block");
  cmd->add_option("--emit", o->emit, "Print a compiler stage instead of running (see emit)")
      ->check(CLI::IsMember(pipeline_stages()));
  cmd->add_option("--disable", o->disable, disable_help())->delimiter(',');
  return {cmd, [o, numbers] {
            numbers->read(*o);
            return run(*o);
          }};
}

}  // namespace acrobat::cli
