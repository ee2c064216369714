// `acrobat bench --ragged`: the transformer encoder layer on variable-length sequences, CoRa's
// benchmark. For each length file (data/lengths), batch size and thread count: acrobat's AOT and
// interpreter engines, and side by side in the same run PyTorch 1.13's three CPU strategies
// (bench/ragged_pytorch.py: padded to the batch's longest, sorted micro-batches each padded to
// its own longest, the nested-tensor fast path). A cell is the first `batches` batches of
// consecutive lines of a length file; every row of a cell runs the same lengths, and a dense
// control cell runs as many instances of the file's mean length. Figures: useful GFLOP/s (the
// unpadded work, counted by the PyTorch script's formula for every row), the padding FLOPs as a
// share of them, peak memory, and each acrobat row's ratio to PyTorch's best strategy in its
// cell. The core's FMA peak, measured at the start, bounds every row: a cell's ceiling is the
// ratio to PyTorch's best that a run at that peak on every thread would reach. The linear layers
// (matmuls by weights) are timed inside the run and compared with a packed GEMM. Writes ragged.json,
// ragged.md (with the one-thread summary) and ragged.png to the output directory.
// With --train the same cells time training steps (forward, backward and an Adam update per batch)
// of the layer under its pooled classifier, beside PyTorch's padded and sorted training; useful
// FLOPs are those of the forward and of the gradients of its products (the script's train_flops).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "support/clock.h"
#include "bench.h"
#include "io/files.h"
#include "kernels/backend.h"
#include "compiler/pipeline.h"
#include "engines/make_engine.h"
#include "engines/inputs.h"
#include "engines/train.h"

namespace acrobat {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The length files to run: names in data/lengths ("mnli") or paths; all of data/lengths by default.
std::vector<std::string> length_files(const BenchRaggedOptions& o) {
  std::vector<std::string> out;
  if (o.lengths.empty()) {
    for (const auto& e : fs::directory_iterator(o.source_dir + "/data/lengths"))
      if (e.path().extension() == ".txt") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  for (const std::string& item : o.lengths) out.push_back(length_file(o.source_dir, item, "--lengths"));
  return out;
}

std::string dataset_name(const std::string& path) { return fs::path(path).stem().string(); }

// One cell of the sweep and what PyTorch measured in it.
struct Cell {
  std::string dataset;  // "mnli" or "mnli-dense"
  std::vector<int64_t> lengths;
  size_t batch;
  int threads;
  bool dense = false;       // the control: every instance at the file's mean length
  double useful_gflop = 0;  // from the PyTorch rows (their formula), else acrobat's count
  double best_pytorch = 0;  // useful GFLOP/s of PyTorch's best strategy here

  // The ratio to PyTorch's best that every thread running at `peak` GFLOP/s would reach; 0 without
  // a PyTorch figure.
  double ceiling(double peak) const { return best_pytorch > 0 ? peak * threads / best_pytorch : 0; }
};

// Per engine and thread count, over the ragged cells (not the dense controls) that have a PyTorch
// figure: the geometric mean, minimum and maximum of the ratio to PyTorch's best, and how many cells
// reach 1.25x; per thread count, the same for the ceiling. Markdown lines.
std::string summary(const json& rows, const std::vector<Cell>& cells, double peak) {
  std::map<std::pair<std::string, int>, std::vector<double>> ratios;
  for (const auto& r : rows) {
    if (r["engine"] != "aot" && r["engine"] != "interpreter") continue;
    if (r["dense"].get<bool>() || r["ratio_to_best_pytorch"].get<double>() <= 0) continue;
    ratios[{r["engine"].get<std::string>(), r["threads"].get<int>()}].push_back(r["ratio_to_best_pytorch"].get<double>());
  }
  for (const Cell& c : cells)
    if (c.best_pytorch > 0 && !c.dense) ratios[{"ceiling", c.threads}].push_back(c.ceiling(peak));
  std::string out;
  for (const auto& [key, v] : ratios) {
    double log_sum = 0;
    size_t above = 0;
    for (double x : v) {
      log_sum += std::log(x);
      above += x >= 1.25;
    }
    out += fmt::format("- {}, {} thread{}: geomean {:.2f}x PyTorch's best, min {:.2f}x, max {:.2f}x, {} of {} cells "
                       ">= 1.25x\n",
                       key.first, key.second, key.second == 1 ? "" : "s", std::exp(log_sum / static_cast<double>(v.size())),
                       *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), above, v.size());
  }
  // The share of the FMA peak (of every thread), per engine and thread count.
  std::map<std::pair<std::string, int>, std::vector<double>> shares;
  for (const auto& r : rows)
    if ((r["engine"] == "aot" || r["engine"] == "interpreter") && !r["dense"].get<bool>() && r["useful_gflop"].get<double>() > 0)
      shares[{r["engine"].get<std::string>(), r["threads"].get<int>()}].push_back(r["share_of_fma_peak"].get<double>());
  for (const auto& [key, v] : shares)
    out += fmt::format("- {}, {} thread{}: {:.0f}% of the FMA peak (median; min {:.0f}%, max {:.0f}%)\n", key.first,
                       key.second, key.second == 1 ? "" : "s", 100 * median(v), 100 * *std::min_element(v.begin(), v.end()),
                       100 * *std::max_element(v.begin(), v.end()));
  // The linear layers' share of the packed-GEMM yardstick, per engine and thread count.
  std::map<std::pair<std::string, int>, std::vector<double>> linear;
  for (const auto& r : rows)
    if (r.contains("linear_share_of_packed_gemm"))
      linear[{r["engine"].get<std::string>(), r["threads"].get<int>()}].push_back(r["linear_share_of_packed_gemm"].get<double>());
  for (const auto& [key, v] : linear)
    out += fmt::format("- {}, {} thread{}: linear layers at {:.0f}% of the packed GEMM per thread (median; min {:.0f}%, "
                       "max {:.0f}%)\n",
                       key.first, key.second, key.second == 1 ? "" : "s", 100 * median(v),
                       100 * *std::min_element(v.begin(), v.end()), 100 * *std::max_element(v.begin(), v.end()));
  return out;
}

// 1. PyTorch, every cell, first (its table goes straight through): its rows, and with --train why its
// nested tensors do not train (the script's check), for the report.
struct TorchSide {
  json rows = json::array();
  std::string nested_refusal;
  std::string openblas_core;  // the kernels its sgemm ran (bench/ragged_pytorch.py records them)
};

TorchSide pytorch_side(const BenchRaggedOptions& o, const std::vector<std::string>& files) {
  if (!o.pytorch) return {};
  std::string path = o.pytorch_json;
  if (path.empty()) {
    path = o.out_dir + "/pytorch.json";
    const std::string cmd = fmt::format(
        "/usr/bin/python3 {} --lengths {} --batch {} --threads {} --batches {} --reps {} --seed {}{}{} --json {}",
        io::shell_quote(o.source_dir + "/bench/ragged_pytorch.py"), io::shell_quote(fmt::format("{}", fmt::join(files, ","))),
        fmt::join(o.batches, ","), fmt::join(o.threads, ","), o.batches_per_cell, o.reps, o.seed,
        o.dense ? " --dense" : "", o.train ? " --train" : "", io::shell_quote(path));
    std::cout << "bench: PyTorch side: " << cmd << "\n" << std::flush;
    if (std::system(cmd.c_str()) != 0) throw UserError("bench --ragged: the PyTorch side failed (" + cmd + ")");
  } else {
    std::cout << "bench: PyTorch's rows from " << path << "\n";
  }
  json doc = json::parse(io::read_file(path), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("results") || !doc["results"].is_array() ||
      (doc.value("benchmark", "") == "ragged-encoder-training") != o.train)
    throw UserError(path + ": not the PyTorch rows of a" + (o.train ? " --train" : " forward") +
                    " ragged benchmark (bench/ragged_pytorch.py's JSON)");
  TorchSide side{doc["results"], "", ""};
  if (o.train && doc.contains("nested_training") && doc["nested_training"].is_string())
    side.nested_refusal = doc["nested_training"].get<std::string>();
  if (doc.contains("openblas_core") && doc["openblas_core"].is_string())
    side.openblas_core = doc["openblas_core"].get<std::string>();
  return side;
}

// 2. The cells, with the PyTorch figures they need.
std::vector<Cell> make_cells(const BenchRaggedOptions& o, const std::vector<std::string>& files,
                             const std::vector<std::string>& names, const json& torch_rows) {
  std::vector<Cell> cells;
  for (int threads : o.threads)
    for (size_t f = 0; f < files.size(); ++f) {
      const std::vector<int64_t> all = read_length_file(files[f]);
      for (size_t batch : o.batches) {
        const size_t nb = std::min<size_t>(o.batches_per_cell, all.size() / batch);
        if (nb == 0) continue;
        std::vector<int64_t> lens(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(nb * batch));
        std::vector<Cell> here{Cell{names[f], lens, batch, threads}};
        if (o.dense) {
          double mean = 0;
          for (int64_t n : all) mean += static_cast<double>(n);
          const int64_t dense = std::max<int64_t>(1, std::llround(mean / static_cast<double>(all.size())));
          here.push_back(Cell{names[f] + "-dense", std::vector<int64_t>(lens.size(), dense), batch, threads, true});
        }
        for (Cell& c : here) {
          for (const auto& r : torch_rows)
            if (r["dataset"] == c.dataset && r["batch"] == c.batch && r["threads"] == c.threads) {
              c.useful_gflop = r["useful_gflop"].get<double>();
              c.best_pytorch = std::max(c.best_pytorch, r["useful_gflops"].get<double>());
            }
          cells.push_back(std::move(c));
        }
      }
    }
  return cells;
}

// The machine's yardsticks: the FMA peak of a core and the packed GEMM of one thread.
struct Yardsticks {
  double peak, packed_gemm;
};

// What one pass over a cell's batches reports besides its time.
struct PassFigures {
  int64_t peak_bytes = 0;
  int64_t flops = 0;          // acrobat's count of the useful FLOPs (0: none; the PyTorch script's count is used)
  double linear_gflops = -1;  // the linear layers' GFLOP/s per thread; < 0: not measured
};

// 3. One engine on one cell: a warm-up pass (libxsmm compiles its kernels for new sizes), then
// --reps passes; the median, printed as a row of the table and returned as a JSON row.
json measure(const BenchRaggedOptions& o, const std::string& kind, const Cell& c, const Yardsticks& y,
             const std::function<PassFigures()>& pass) {
  pass();  // warm-up
  std::vector<double> secs;
  PassFigures f;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = Clock::now();
    f = pass();
    secs.push_back(seconds_since(t0));
  }
  const double s = median(secs);
  const double useful = c.useful_gflop > 0 ? c.useful_gflop : static_cast<double>(f.flops) * 1e-9;
  const double gflops = useful / s;
  const std::string name = kind == "aot" ? "aot" : "interpreter";
  const double ratio = c.best_pytorch > 0 ? gflops / c.best_pytorch : 0;
  const double ceiling = c.ceiling(y.peak);
  // The linear layers (matmuls by the weights) per thread, as a share of the packed GEMM.
  const double linear = f.linear_gflops / y.packed_gemm;
  std::cout << fmt::format("{:<14} {:>5} {:>3}  {:<15} {:>14} {:>7.1f}% {:>9.1f} {:>8.3f} {:>8} {:>8} {:>8}\n",
                           c.dataset, c.batch, c.threads, name, useful > 0 ? fmt::format("{:.1f}", gflops) : "-", 0.0,
                           static_cast<double>(f.peak_bytes) / (1 << 20), s,
                           ratio > 0 ? fmt::format("{:.2f}x", ratio) : "-",
                           ceiling > 0 ? fmt::format("{:.2f}x", ceiling) : "-",
                           f.linear_gflops >= 0 ? fmt::format("{:.1f}%", 100 * linear) : "-")
            << std::flush;
  int64_t tokens = 0;
  for (int64_t n : c.lengths) tokens += n;
  json row{{"engine", name},
           {"dataset", c.dataset},
           {"dense", c.dense},
           {"batch", c.batch},
           {"threads", c.threads},
           {"instances", c.lengths.size()},
           {"tokens", tokens},
           {"max_length", *std::max_element(c.lengths.begin(), c.lengths.end())},
           {"useful_gflop", useful},
           {"useful_gflops", gflops},
           {"padding_share", 0.0},
           {"seconds", s},
           {"seconds_reps", secs},
           {"instances_per_s", static_cast<double>(c.lengths.size()) / s},
           {"peak_bytes", f.peak_bytes},
           {"ratio_to_best_pytorch", ratio},
           {"share_of_fma_peak", gflops / (y.peak * c.threads)}};
  if (f.linear_gflops >= 0) {
    row["linear_gflops_per_thread"] = f.linear_gflops;
    row["linear_share_of_packed_gemm"] = linear;
  }
  return row;
}

// 4. JSON, a Markdown table of the ratios, and the plot.
void write_report(const BenchRaggedOptions& o, const json& rows, const std::vector<Cell>& cells, const Yardsticks& y,
                  const TorchSide& torch) {
  const std::string& nested_refusal = torch.nested_refusal;
  const double peak = y.peak;
  json doc{{"benchmark", o.train ? "ragged-encoder-training" : "ragged-encoder-layer"}, {"model", o.model},
           {"batches_per_cell", o.batches_per_cell}, {"reps", o.reps}, {"fma_peak_gflops_per_core", peak},
           {"packed_gemm_gflops", y.packed_gemm}, {"cpu", cpu_description()},
           {"backend", kernels::backend_description()},
           {"pytorch_openblas_core", torch.openblas_core.empty() ? json() : json(torch.openblas_core)},
           {"results", rows}};
  if (o.train) {
    doc["loss_entry"] = o.loss_entry;
    doc["optimizer"] = fmt::format("adam, lr {}", o.lr);
    doc["nested_training"] = nested_refusal.empty() ? json() : json(nested_refusal);
  }
  const std::string json_path = o.json_path.empty() ? o.out_dir + "/ragged.json" : o.json_path;
  io::write_file(json_path, doc.dump(1) + "\n");
  std::ostringstream md;
  if (o.train)
    md << "# Encoder layer training on ragged batches\n\n`acrobat bench --ragged --train`: training steps "
          "(forward, backward and one Adam update per batch) of the layer under its pooled classifier "
          "(models/encoder.acr's `" << o.loss_entry << "`; PyTorch: padded with a key-padding mask, or sorted "
          "micro-batches with accumulated gradients at the best micro-batch size). Useful FLOPs: the forward's "
          "products and their gradients on the unpadded rows. PyTorch's nested tensors do not train: "
       << (nested_refusal.empty() ? "(not checked)" : nested_refusal) << ".\n\nFigures: ";
  else
    md << "# Encoder layer on ragged batches\n\n`acrobat bench --ragged`: ";
  md << "useful GFLOP/s (the unpadded "
        "work only) and, in brackets, the ratio to PyTorch's best strategy in the cell; medians of "
     << o.reps << " repetitions of " << o.batches_per_cell << " batches. This core's fp32 FMA peak: "
     << fmt::format("{:.1f}", peak)
     << " GFLOP/s; the ceiling is the ratio to PyTorch's best that every thread running at that peak "
        "would reach. The linear layers (the matmuls by weights, with their gathers and fused addends) "
        "are compared with a 1024^3 GEMM on packed weights, one thread: "
     << fmt::format("{:.1f}", y.packed_gemm) << " GFLOP/s. CPU: " << cpu_description() << "; acrobat's kernels: "
     << kernels::backend_description()
     << (torch.openblas_core.empty() ? std::string()
                                     : "; PyTorch's sgemm: OpenBLAS " + torch.openblas_core + " core")
     << ".\n\n"
     << summary(rows, cells, peak) << "\n"
     << "| dataset | batch | threads | AOT | interpreter | PyTorch padded | PyTorch sorted | PyTorch nested | ceiling |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  for (const Cell& c : cells) {
    auto cell = [&](const std::string& engine) -> std::string {
      for (const auto& r : rows)
        if (r["engine"] == engine && r["dataset"] == c.dataset && r["batch"] == c.batch && r["threads"] == c.threads) {
          const double g = r["useful_gflops"].get<double>();
          return c.best_pytorch > 0 ? fmt::format("{:.1f} ({:.2f}x)", g, g / c.best_pytorch) : fmt::format("{:.1f}", g);
        }
      return "-";
    };
    md << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", c.dataset, c.batch, c.threads, cell("aot"),
                      cell("interpreter"), cell("pytorch-padded"), cell("pytorch-sorted"), cell("pytorch-nested"),
                      c.best_pytorch > 0 ? fmt::format("{:.2f}x", c.ceiling(peak)) : "-");
  }
  io::write_file(o.out_dir + "/ragged.md", md.str());
  const std::string plot = fmt::format("/usr/bin/python3 {} {} {}", io::shell_quote(o.source_dir + "/bench/plot_ragged.py"),
                                       io::shell_quote(json_path), io::shell_quote(o.out_dir + "/ragged.png"));
  if (std::system(plot.c_str()) != 0) std::cerr << "bench: warning: the plot failed (" << plot << ")\n";
  std::cout << "bench: wrote " << json_path << ", " << o.out_dir << "/ragged.md, ragged.png\n";
}

}  // namespace

int bench_ragged_command(const BenchRaggedOptions& o) {
  fs::create_directories(o.out_dir);
  const std::vector<std::string> files = length_files(o);
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(dataset_name(f));

  const Yardsticks y{kernels::fma_peak_gflops(), gemm_gflops(9, true)};
  std::cout << fmt::format("bench: this core's fp32 FMA peak: {:.1f} GFLOP/s; packed GEMM 1024^3, one thread: "
                           "{:.1f} GFLOP/s (the linear layers' yardstick)\n", y.peak, y.packed_gemm);
  const TorchSide torch = pytorch_side(o, files);
  const json& torch_rows = torch.rows;
  const std::vector<Cell> cells = make_cells(o, files, names, torch_rows);

  // 3. acrobat, every cell: one engine per kind and thread count (training: each with its own copy of
  // the params and its optimiser).
  auto module = compile_model(o.model, CompileOptions{});
  const ParamStore initial = o.params.empty() ? init_params(*module, o.seed) : load_params(*module, o.params);
  auto shared = std::make_shared<ParamStore>(initial);
  const std::string entry_name = o.train ? o.loss_entry : "main";
  const ir::Function& entry = module->functions[entry_function(*module, entry_name)];
  const Type& in_type = entry.vars[entry.params[0]].type;
  if (!is_rows_type(in_type)) {
    SizeNamesScope names(module->plan->size_names);
    throw UserError(o.model + ": bench --ragged needs a model whose " + entry_name + " takes f32[n, ...] (n per " +
                    "instance, the rest fixed)" + (o.train ? " or a pair (f32[1, C], f32[n, ...])" : "") + ", found " +
                    type_str(in_type));
  }
  json rows = json::array();
  for (const auto& r : torch_rows) rows.push_back(r);
  if (o.train && !torch.nested_refusal.empty())
    std::cout << "bench: PyTorch's nested tensors do not train: " << torch.nested_refusal << "\n";
  std::cout << fmt::format("\n{:<14} {:>5} {:>3}  {:<15} {:>14} {:>8} {:>9} {:>8} {:>9} {:>8} {:>8}\n", "dataset", "batch",
                           "thr", "engine", "useful GFLOP/s", "padding", "peak MiB", "seconds",
                           "vs best", "ceiling", "linear");
  struct Runner {
    std::shared_ptr<ParamStore> params;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<Optimizer> optimizer;  // training only
  };
  std::map<std::pair<std::string, int>, Runner> runners;
  for (const Cell& c : cells) {
    std::vector<Value> inputs;
    for (size_t i = 0; i < c.lengths.size(); ++i) inputs.push_back(random_rows(in_type, c.lengths[i], o.seed + i));
    for (const std::string& kind : o.engines) {
      Runner& r = runners[{kind, c.threads}];
      if (!r.params) {
        r.params = o.train ? std::make_shared<ParamStore>(make_params(*module, copy_tensors(initial), initial.source))
                           : shared;
        if (o.train) r.optimizer = std::make_unique<Optimizer>(OptimizerOptions{.lr = o.lr}, *r.params, c.threads);
      }
      if (!r.engine) r.engine = make_engine({.engine = kind, .threads = c.threads}, module, r.params);
      std::function<PassFigures()> pass = [&] {
        const RunStats stats = r.engine->run_batches(inputs, c.batch).stats;
        return PassFigures{stats.peak_bytes, stats.flops, stats.weight_gemm_gflops()};
      };
      if (o.train)
        pass = [&] {
          PassFigures f;
          for (size_t b = 0; b < inputs.size(); b += c.batch) {
            const std::vector<Value> part(inputs.begin() + static_cast<std::ptrdiff_t>(b),
                                          inputs.begin() + static_cast<std::ptrdiff_t>(std::min(inputs.size(), b + c.batch)));
            f.peak_bytes = std::max(f.peak_bytes, train_step(*r.engine, *r.optimizer, *r.params, part, o.loss_entry).peak_bytes);
          }
          return f;
        };
      rows.push_back(measure(o, kind, c, y, pass));
      // A training engine keeps its buffers for the kept values and adjoints of the largest step it
      // ran (gigabytes on RACE's batches of 64): it is made again for the next cell.
      if (o.train) r.engine.reset();
    }
  }
  write_report(o, rows, cells, y, torch);
  return 0;
}

}  // namespace acrobat
