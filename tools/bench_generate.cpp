// `acrobat bench --generate`: greedy generation with the decoder-only transformer of models/gpt.acr
// (prefill, then per layer a KV cache that grows a row per step, until the end token or the
// instance's budget). The instances: prompt lengths from one length file of data/lengths and output
// budgets from another, line by line (budgets clipped to 1..256 and to the positions the prompt
// leaves), the prompts' token ids random from a seed. For each batch size and thread count:
// acrobat's AOT and interpreter engines and, side by side in the same run, PyTorch 1.13's
// strategies (bench/generate_pytorch.py: a padded static batch, the same dropping the instances
// that ended after each step, one instance at a time) on the same weights (the script writes them
// from the oracle's init_params) and the same instances. Figures: generated tokens/s, prefill and
// decode time apart, useful GFLOP/s (the script's formula, for every row) and its share of the
// core's FMA peak measured at the start, and each acrobat row's ratio to PyTorch's best strategy in
// its cell. acrobat's engines do not time prefill and decode apart: its prefill is a second run of
// the same instances with a budget of one token (the prompt and its first token), its decode the
// full run's time minus that. Writes generate.json, generate.md and generate.png to --out.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "bench.h"
#include "compiler/options.h"
#include "compiler/pipeline.h"
#include "engines/engine.h"
#include "engines/inputs.h"
#include "engines/make_engine.h"
#include "io/files.h"
#include "kernels/backend.h"
#include "support/clock.h"

namespace acrobat {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kMaxBudget = 256;  // the budgets' clip: tokens an instance may generate

// The model's sizes that the FLOP formula and the instances need.
struct Dims {
  int64_t D = 0, FF = 0, L = 0, V = 0, P = 0, EOS = 0;
};

Dims model_dims(const ir::Module& module, const std::string& model) {
  std::map<std::string, int64_t> dims(module.dims.begin(), module.dims.end());
  auto get = [&](const char* name) {
    auto it = dims.find(name);
    if (it == dims.end())
      throw UserError(model + ": bench --generate needs models/gpt.acr's dims (D, FF, L, V, P, EOS); no dim " + name);
    return it->second;
  };
  return Dims{get("D"), get("FF"), get("L"), get("V"), get("P"), get("EOS")};
}

// Useful FLOPs, bench/generate_pytorch.py's formula (its docstring says what is counted): a prompt
// of n tokens through every layer with its last token's logits; a decode step feeding the token at
// position t; the g - 1 steps of an instance that generates g tokens.
double prefill_flops(const Dims& d, int64_t n) {
  const double D = static_cast<double>(d.D), m = static_cast<double>(n);
  return static_cast<double>(d.L) * (m * (8 * D * D + 4 * D * static_cast<double>(d.FF)) + 2 * D * m * (m + 1)) +
         2 * D * static_cast<double>(d.V);
}

double step_flops(const Dims& d, int64_t t) {
  const double D = static_cast<double>(d.D);
  return static_cast<double>(d.L) * (8 * D * D + 4 * D * static_cast<double>(d.FF) + 4 * static_cast<double>(t + 1) * D) +
         2 * D * static_cast<double>(d.V);
}

double decode_flops(const Dims& d, int64_t n, int64_t g) {
  double sum = 0;
  for (int64_t t = n; t < n + g - 1; ++t) sum += step_flops(d, t);
  return sum;
}

// The floor a decode can reach on this machine (a roofline): per decode step of a batch, the
// longer of its useful FLOPs at the FMA peak of `threads` cores and its bytes at the read bandwidth
// `threads` threads measured (`bandwidth`, GB/s): every weight matrix and vector once (the token's
// and position's embedding rows aside), and every live instance's key and value caches of every
// layer, its new row included. Instances run in consecutive batches of `batch`, as run_batches
// and the PyTorch strategies take them; instance i (prompt n_i, g_i tokens) takes part in decode
// steps 0 .. g_i - 2 of its batch, at position n_i + step.
struct Bound {
  double seconds = 0;
  double memory_seconds = 0;  // of them, in steps whose bytes take longer than their FLOPs
};

Bound decode_bound(const Dims& d, const std::vector<int64_t>& prompts, const std::vector<int64_t>& generated,
                   size_t batch, int threads, double peak, double bandwidth) {
  const double D = double(d.D), FF = double(d.FF);
  const double weight_bytes =
      4 * (double(d.L) * (D * 3 * D + 3 * D + D * D + D + D * FF + FF + FF * D + D + 4 * D) + 2 * D + D * double(d.V));
  Bound b;
  for (size_t first = 0; first < prompts.size(); first += batch) {
    const size_t end = std::min(prompts.size(), first + batch);
    for (int64_t step = 0;; ++step) {
      double flops = 0, bytes = weight_bytes;
      bool live = false;
      for (size_t i = first; i < end; ++i) {
        if (step >= generated[i] - 1) continue;
        live = true;
        const int64_t t = prompts[i] + step;
        flops += step_flops(d, t);
        bytes += 4 * double(d.L) * 2 * double(t + 1) * D;
      }
      if (!live) break;
      const double compute = flops * 1e-9 / (peak * threads), memory = bytes * 1e-9 / bandwidth;
      b.seconds += std::max(compute, memory);
      if (memory > compute) b.memory_seconds += memory;
    }
  }
  return b;
}

// The bound's fields of a row.
void add_bound(json& row, const Dims& d, const std::vector<int64_t>& prompts, const std::vector<int64_t>& generated,
               double peak, const std::map<int, double>& bandwidth) {
  const int threads = row["threads"].get<int>();
  const Bound b = decode_bound(d, prompts, generated, row["engine"] == "pytorch-single" ? 1 : row["batch"].get<size_t>(),
                               threads, peak, bandwidth.at(threads));
  const double decode = row["decode_seconds"].get<double>();
  row["decode_bound_seconds"] = b.seconds;
  row["decode_bound_memory_share"] = b.seconds > 0 ? b.memory_seconds / b.seconds : 0.0;
  row["decode_over_bound"] = b.seconds > 0 ? decode / b.seconds : 0.0;
}

// 1. The instances: line i of the prompt file gives the i-th prompt's length, line i of the budget
// file its budget.
struct Instance {
  std::vector<int64_t> prompt;
  int64_t budget = 1;
};

struct Workload {
  std::string prompts_file, budgets_file;
  std::vector<Instance> instances;
  size_t clipped = 0;                  // budgets cut to kMaxBudget or to the positions left
  std::vector<Value> full, prefill;    // the instances; the same with a budget of one token
  Type output_type;
  Dims dims;
  json pytorch_outputs;                // the tokens PyTorch generated (null without its side)
  std::string pytorch_core;            // the OpenBLAS core PyTorch's sgemm ran (empty without its side)
};

std::vector<Instance> make_instances(const BenchGenerateOptions& o, Workload& w) {
  const std::vector<int64_t> prompts = read_length_file(w.prompts_file);
  const std::vector<int64_t> budgets = read_length_file(w.budgets_file);
  if (prompts.size() < o.instances || budgets.size() < o.instances)
    throw UserError(fmt::format("--limit {}: the length files have {} and {} lines", o.instances, prompts.size(),
                                budgets.size()));
  const Dims& d = w.dims;
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> word(0, d.V - 2);  // every id but the end token
  std::vector<Instance> out;
  for (size_t i = 0; i < o.instances; ++i) {
    Instance inst;
    const int64_t n = std::min(prompts[i], d.P - 1);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t id = word(rng);
      inst.prompt.push_back(id < d.EOS ? id : id + 1);
    }
    inst.budget = std::min({budgets[i], kMaxBudget, d.P - n});
    w.clipped += inst.budget != budgets[i];
    out.push_back(std::move(inst));
  }
  return out;
}

json instance_json(const Instance& inst, int64_t budget) { return json::array({inst.prompt, budget}); }

// The instances as JSON lines (what `acrobat run --input json:` and the PyTorch script read) and as
// values of the entry's parameter type.
void prepare_workload(const BenchGenerateOptions& o, const ir::Module& module, Workload& w,
                      const std::string& instances_path) {
  w.instances = make_instances(o, w);
  const ir::Function& entry = module.functions[entry_function(module, "main")];
  const Type& in_type = entry.vars[entry.params[0]].type;
  w.output_type = entry.ret;
  SizeNamesScope names(module.plan->size_names);
  std::string lines;
  for (size_t i = 0; i < w.instances.size(); ++i) {
    const Instance& inst = w.instances[i];
    const SourceLoc where{instances_path, static_cast<uint32_t>(i + 1), 1};
    w.full.push_back(value_from_json(instance_json(inst, inst.budget), in_type, where));
    w.prefill.push_back(value_from_json(instance_json(inst, 1), in_type, where));
    lines += instance_json(inst, inst.budget).dump() + "\n";
  }
  io::write_file(instances_path, lines);
}

// 2. PyTorch, every cell, first: its JSON document (rows and the tokens it generated); it writes
// the weights to `params_path` unless they are given.
json pytorch_doc(const BenchGenerateOptions& o, const std::string& instances_path, const std::string& params_path) {
  const std::string out = o.out_dir + "/pytorch.json";
  std::string cmd = fmt::format(
      "/usr/bin/python3 {} --instances {} --batch {} --threads {} --reps {} --seed {} --json {}",
      io::shell_quote(o.source_dir + "/bench/generate_pytorch.py"), io::shell_quote(instances_path),
      fmt::join(o.batches, ","), fmt::join(o.threads, ","), o.reps, o.seed, io::shell_quote(out));
  cmd += o.params.empty() ? " --params " + io::shell_quote(params_path) : " --load-params " + io::shell_quote(o.params);
  if (!o.sets.empty()) cmd += " --set " + io::shell_quote(fmt::format("{}", fmt::join(o.sets, ",")));
  std::cout << "bench: PyTorch side: " << cmd << "\n" << std::flush;
  if (std::system(cmd.c_str()) != 0) throw UserError("bench --generate: the PyTorch side failed (" + cmd + ")");
  return json::parse(io::read_file(out));
}

std::vector<Value> first(const std::vector<Value>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size()))};
}

// The number of tokens each instance generated, and how many instances generated other tokens than
// PyTorch did (-1: no PyTorch tokens).
std::pair<std::vector<int64_t>, int64_t> count_tokens(const Workload& w, const RunResult& res) {
  std::vector<int64_t> tokens;
  int64_t differing = w.pytorch_outputs.is_array() ? 0 : -1;
  for (size_t i = 0; i < res.outputs.size(); ++i) {
    const json out = value_to_json(res.outputs[i], w.output_type);
    tokens.push_back(static_cast<int64_t>(out.size()));
    if (differing >= 0 && (i >= w.pytorch_outputs.size() || out != w.pytorch_outputs[i])) ++differing;
  }
  return {tokens, differing};
}

std::vector<int64_t> prompt_lengths(const Workload& w) {
  std::vector<int64_t> n;
  for (const Instance& inst : w.instances) n.push_back(static_cast<int64_t>(inst.prompt.size()));
  return n;
}

// 3. One engine in one cell: a warm-up on the first batch, then --reps runs of every instance, each
// followed by a run of the same instances with a budget of one token (the prefill); medians.
json measure(const BenchGenerateOptions& o, Engine& engine, const std::string& kind, size_t batch, int threads,
             const Workload& w, double peak, const std::map<int, double>& bandwidth) {
  engine.run_batches(first(w.full, batch), batch);
  engine.run_batches(first(w.prefill, batch), batch);
  std::vector<double> full_secs, prefill_secs;
  RunResult last;
  for (int r = 0; r < o.reps; ++r) {
    auto t0 = Clock::now();
    last = engine.run_batches(w.full, batch);
    full_secs.push_back(seconds_since(t0));
    t0 = Clock::now();
    engine.run_batches(w.prefill, batch);
    prefill_secs.push_back(seconds_since(t0));
  }
  const double secs = median(full_secs), pre_secs = std::min(median(prefill_secs), secs);
  const auto [generated, differing] = count_tokens(w, last);
  double pre = 0, dec = 0;
  int64_t prompt_tokens = 0, tokens = 0;
  for (size_t i = 0; i < w.instances.size(); ++i) {
    const int64_t n = static_cast<int64_t>(w.instances[i].prompt.size());
    pre += prefill_flops(w.dims, n);
    dec += decode_flops(w.dims, n, generated[i]);
    prompt_tokens += n;
    tokens += generated[i];
  }
  const RunStats& s = last.stats;
  json row{{"engine", kind == "aot" ? "aot" : "interpreter"},
              {"batch", batch},
              {"threads", threads},
              {"instances", w.instances.size()},
              {"prompt_tokens", prompt_tokens},
              {"tokens", tokens},
              {"seconds", secs},
              {"prefill_seconds", pre_secs},
              {"decode_seconds", secs - pre_secs},
              {"seconds_reps", full_secs},
              {"prefill_seconds_reps", prefill_secs},
              {"tokens_per_s", static_cast<double>(tokens) / secs},
              {"useful_gflop", (pre + dec) * 1e-9},
              {"prefill_useful_gflop", pre * 1e-9},
              {"decode_useful_gflop", dec * 1e-9},
              {"useful_gflops", (pre + dec) * 1e-9 / secs},
              {"prefill_useful_gflops", pre * 1e-9 / pre_secs},
              {"decode_useful_gflops", secs > pre_secs ? dec * 1e-9 / (secs - pre_secs) : 0.0},
              {"share_of_fma_peak", (pre + dec) * 1e-9 / secs / (peak * threads)},
              {"padding_share", 0.0},
              {"mean_batch", s.mean_batch_size()},
              {"peak_bytes", s.peak_bytes},
              {"kernel_seconds", s.kernel_seconds},
              {"host_seconds", s.host_seconds + s.schedule_seconds},
              {"instances_differing_from_pytorch", differing}};
  add_bound(row, w.dims, prompt_lengths(w), generated, peak, bandwidth);
  return row;
}

// 4. The report. The best PyTorch strategy's tokens/s in a cell (single runs one instance at a time
// whatever the batch size), 0 without one.
double best_pytorch(const json& rows, size_t batch, int threads) {
  double best = 0;
  for (const auto& r : rows)
    if (r["engine"].get<std::string>().rfind("pytorch-", 0) == 0 && r["threads"] == threads &&
        (r["batch"] == batch || r["engine"] == "pytorch-single"))
      best = std::max(best, r["tokens_per_s"].get<double>());
  return best;
}

const json* find_row(const json& rows, const std::string& engine, size_t batch, int threads) {
  for (const auto& r : rows)
    if (r["engine"] == engine && r["threads"] == threads && (r["batch"] == batch || engine == "pytorch-single"))
      return &r;
  return nullptr;
}

std::string mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return fmt::format("{:.1f}", v.empty() ? 0 : sum / static_cast<double>(v.size()));
}

// The first lines: the workload, the CPU and its peak.
std::string bandwidth_text(const std::map<int, double>& bandwidth) {
  std::vector<std::string> parts;
  for (auto [t, gbs] : bandwidth) parts.push_back(fmt::format("{:.1f} GB/s with {} thread{}", gbs, t, t > 1 ? "s" : ""));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string report_header(const BenchGenerateOptions& o, const Workload& w, double peak,
                          const std::map<int, double>& bandwidth) {
  std::vector<double> n, b;
  for (const Instance& inst : w.instances) {
    n.push_back(static_cast<double>(inst.prompt.size()));
    b.push_back(static_cast<double>(inst.budget));
  }
  const Dims& d = w.dims;
  return fmt::format(
      "# Greedy generation: acrobat against PyTorch\n\n`acrobat bench --generate`: {} (D {}, FF {}, {} layers, V {}) "
      "on {} instances: prompt lengths from {} (mean {}, max {:.0f}), budgets from {} clipped to 1..{} (mean {}, max "
      "{:.0f}; {} clipped), token ids random from seed {}. Generated tokens/s, medians of {} runs (PyTorch's "
      "one-at-a-time strategy: one run); useful GFLOP/s by bench/generate_pytorch.py's formula for every row. CPU: {}; "
      "acrobat's kernels: {}{}; this core's fp32 FMA peak: {:.1f} GFLOP/s; memory read bandwidth "
      "(kernels::read_bandwidth_gbs, 256 MiB): {}. "
      "acrobat's prefill is a run of the same instances with a budget of one token, its decode the full run minus "
      "that.\n\n",
      fs::path(o.model).filename().string(), d.D, d.FF, d.L, d.V, w.instances.size(),
      fs::path(w.prompts_file).filename().string(), mean_of(n), *std::max_element(n.begin(), n.end()),
      fs::path(w.budgets_file).filename().string(), kMaxBudget, mean_of(b), *std::max_element(b.begin(), b.end()),
      w.clipped, o.seed, o.reps, cpu_description(), kernels::backend_description(),
      w.pytorch_core.empty() ? std::string() : "; PyTorch's sgemm: OpenBLAS " + w.pytorch_core + " core", peak,
      bandwidth_text(bandwidth));
}

std::string markdown(const BenchGenerateOptions& o, const json& rows, const Workload& w, double peak,
                     const std::map<int, double>& bandwidth) {
  std::ostringstream md;
  md << report_header(o, w, peak, bandwidth)
     << "Tokens/s per cell; in brackets, the ratio to PyTorch's best strategy in the cell.\n\n"
     << "| threads | batch | AOT | interpreter | PyTorch padded | PyTorch drop | PyTorch single |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (int t : o.threads)
    for (size_t b : o.batches) {
      const double best = best_pytorch(rows, b, t);
      auto cell = [&](const std::string& engine) -> std::string {
        const json* r = find_row(rows, engine, b, t);
        if (!r) return "-";
        const double x = (*r)["tokens_per_s"].get<double>();
        return best > 0 ? fmt::format("{:.1f} ({:.2f}x)", x, x / best) : fmt::format("{:.1f}", x);
      };
      md << fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", t, b, cell("aot"), cell("interpreter"),
                        cell("pytorch-padded"), cell("pytorch-drop"), cell("pytorch-single"));
    }
  md << "\nEvery row. Batch: acrobat's mean nodes per kernel launch, PyTorch's mean rows per decode step. "
        "Padding: executed FLOPs over useful ones, minus 1 (acrobat pads nothing). Decode bound: the least time "
        "the decode steps can take here when their data come from memory (weights and caches larger than the "
        "caches of the core, as at the default dims; at small dims they stay in cache and run under it), each "
        "step the longer of its useful FLOPs at the FMA peak (times the threads) and its bytes (every weight "
        "once, and the live instances' caches) at the read bandwidth; memory: the share of that bound in steps "
        "bound by memory; x bound: the decode's time over the bound.\n\n"
     << "| engine | threads | batch size | tokens/s | prefill s | decode s | useful GFLOP/s | of FMA peak | prefill "
        "GFLOP/s | decode GFLOP/s | decode bound s | memory | x bound | padding | batch | peak MiB |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    md << fmt::format("| {} | {} | {} | {:.1f} | {:.2f} | {:.2f} | {:.1f} | {:.1f}% | {:.1f} | {:.1f} | {:.2f} | {:.0f}% | "
                      "{:.2f}x | {:.1f}% | {:.1f} | {} |\n",
                      r["engine"].get<std::string>(), r["threads"].get<int>(), r["batch"].get<size_t>(),
                      r["tokens_per_s"].get<double>(), r["prefill_seconds"].get<double>(),
                      r["decode_seconds"].get<double>(), r["useful_gflops"].get<double>(),
                      100 * r["share_of_fma_peak"].get<double>(), r["prefill_useful_gflops"].get<double>(),
                      r["decode_useful_gflops"].get<double>(), r["decode_bound_seconds"].get<double>(),
                      100 * r["decode_bound_memory_share"].get<double>(), r["decode_over_bound"].get<double>(),
                      100 * r["padding_share"].get<double>(),
                      r.contains("mean_batch") ? r["mean_batch"].get<double>() : r["mean_decode_batch"].get<double>(),
                      r.contains("peak_bytes") ? fmt::format("{:.0f}", r["peak_bytes"].get<double>() / (1 << 20))
                                               : std::string("-"));
  return md.str();
}

void write_report(const BenchGenerateOptions& o, const json& rows, const Workload& w, double peak,
                  const std::map<int, double>& bandwidth) {
  json doc{{"benchmark", "generate"},
           {"model", o.model},
           {"dims", {{"D", w.dims.D}, {"FF", w.dims.FF}, {"L", w.dims.L}, {"V", w.dims.V}, {"P", w.dims.P}}},
           {"prompts", fs::path(w.prompts_file).filename().string()},
           {"budgets", fs::path(w.budgets_file).filename().string()},
           {"max_budget", kMaxBudget},
           {"instances", w.instances.size()},
           {"reps", o.reps},
           {"seed", o.seed},
           {"cpu", cpu_description()},
           {"backend", kernels::backend_description()},
           {"pytorch_openblas_core", w.pytorch_core.empty() ? json() : json(w.pytorch_core)},
           {"fma_peak_gflops_per_core", peak},
           {"read_bandwidth_gbs", [&] {
              json b = json::object();
              for (auto [t, gbs] : bandwidth) b[std::to_string(t)] = gbs;
              return b;
            }()},
           {"results", rows}};
  const std::string json_path = o.json_path.empty() ? o.out_dir + "/generate.json" : o.json_path;
  io::write_file(json_path, doc.dump(1) + "\n");
  io::write_file(o.out_dir + "/generate.md", markdown(o, rows, w, peak, bandwidth));
  const std::string plot = fmt::format("/usr/bin/python3 {} {} {}", io::shell_quote(o.source_dir + "/bench/plot_generate.py"),
                                       io::shell_quote(json_path), io::shell_quote(o.out_dir + "/generate.png"));
  if (std::system(plot.c_str()) != 0) std::cerr << "bench: warning: the plot failed (" << plot << ")\n";
  std::cout << "bench: wrote " << json_path << ", " << o.out_dir << "/generate.md, generate.png\n";
}

void print_row(const json& r) {
  std::cout << fmt::format("{:<15} {:>5} {:>3} {:>9.1f} {:>9.2f} {:>9.2f} {:>8.1f} {:>7.1f}% {:>7.2f}x{}\n",
                           r["engine"].get<std::string>(), r["batch"].get<size_t>(), r["threads"].get<int>(),
                           r["tokens_per_s"].get<double>(), r["prefill_seconds"].get<double>(),
                           r["decode_seconds"].get<double>(), r["useful_gflops"].get<double>(),
                           100 * r["share_of_fma_peak"].get<double>(), r["decode_over_bound"].get<double>(),
                           r.value("instances_differing_from_pytorch", 0) > 0 ? "  (tokens differ from PyTorch's)" : "")
            << std::flush;
}

}  // namespace

int bench_generate_command(const BenchGenerateOptions& o) {
  fs::create_directories(o.out_dir);
  for (size_t b : o.batches)
    if (b > o.instances)
      throw UserError(fmt::format("--batch {}: larger than the {} instances of a cell (--limit)", b, o.instances));
  auto module = compile_model(o.model, compile_options(o.sets));
  Workload w;
  w.dims = model_dims(*module, o.model);
  w.prompts_file = length_file(o.source_dir, o.prompts, "--prompts");
  w.budgets_file = length_file(o.source_dir, o.budgets, "--budgets");
  const std::string instances_path = o.out_dir + "/instances.jsonl", params_path = o.out_dir + "/params.safetensors";
  prepare_workload(o, *module, w, instances_path);

  const double peak = kernels::fma_peak_gflops();
  std::map<int, double> bandwidth;
  for (int t : o.threads) bandwidth[t] = kernels::read_bandwidth_gbs(t);
  std::cout << fmt::format("bench: {}; this core's fp32 FMA peak: {:.1f} GFLOP/s; memory read bandwidth {}\n",
                           cpu_description(), peak, bandwidth_text(bandwidth));
  json rows = json::array();
  if (o.pytorch) {
    const json doc = pytorch_doc(o, instances_path, params_path);
    w.pytorch_outputs = doc["outputs"];
    if (doc.contains("openblas_core") && doc["openblas_core"].is_string()) w.pytorch_core = doc["openblas_core"];
    std::vector<int64_t> generated;
    for (const json& out : w.pytorch_outputs) generated.push_back(static_cast<int64_t>(out.size()));
    for (json r : doc["results"]) {
      r["share_of_fma_peak"] = r["useful_gflops"].get<double>() / (peak * r["threads"].get<int>());
      add_bound(r, w.dims, prompt_lengths(w), generated, peak, bandwidth);
      rows.push_back(std::move(r));
    }
  }
  const std::string params = !o.params.empty() ? o.params : o.pytorch ? params_path : "";
  auto store = std::make_shared<ParamStore>(params.empty() ? init_params(*module, o.seed) : load_params(*module, params));
  std::cout << fmt::format("\n{:<15} {:>5} {:>3} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}\n", "engine", "batch", "thr",
                           "tokens/s", "prefill s", "decode s", "GFLOP/s", "of peak", "x bound");
  for (int threads : o.threads)
    for (const std::string& kind : o.engines) {
      EngineSpec spec;
      spec.engine = kind;
      spec.threads = threads;
      auto engine = make_engine(spec, module, store);
      for (size_t batch : o.batches) {
        rows.push_back(measure(o, *engine, kind, batch, threads, w, peak, bandwidth));
        print_row(rows.back());
      }
    }
  write_report(o, rows, w, peak, bandwidth);
  return 0;
}

}  // namespace acrobat
