// `acrobat bench`: side-by-side throughput of the engines on one model and data set.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/params.h"

namespace acrobat {

struct BenchOptions {
  std::string model;
  std::vector<size_t> batches = {1, 8, 64};
  std::vector<std::string> schedulers = {"inline-depth", "depth", "agenda"};
  // Engines besides the reference: "batched" (the interpreter path, one row per scheduler and
  // batch) and "aot" (one row per thread count and batch).
  std::vector<std::string> engines = {"batched"};
  std::vector<int> threads = {1};
  std::string aot_cache_dir;
  std::vector<std::string> sets;  // K=V, passed on to PyTorch too
  int reps = 3;
  std::string json_path;
  // Another process spins on one core while the rows run (not during the PyTorch row).
  bool busy_neighbour = false;
  // Eager PyTorch row (empty model: none).
  std::string pytorch_model, pytorch_script, data_path, vocab_path, pytorch_params;
  size_t pytorch_limit = 300;
};

// "Intel(R) Xeon(R) Processor, AVX-512": the CPU's model name and whether it has AVX-512, from
// /proc/cpuinfo, for the records of every benchmark.
std::string cpu_description();

// The median of the figures of repeated measurements (the mean of the middle two when even).
double median(std::vector<double> v);

// GFLOP/s of a 1024^3 single-thread GEMM on this machine now (median of `reps`, at least 3):
// OpenBLAS cblas_sgemm (`packed` false; the yardstick for useful GFLOP/s) or acrobat's dispatcher on
// pre-packed weights (the yardstick for the linear layers of ragged blocks).
double gemm_gflops(int reps, bool packed);

// A length file (one sequence length a line) by its name in <source_dir>/data/lengths ("mnli") or
// its path; a UserError naming `flag` when there is none.
std::string length_file(const std::string& source_dir, const std::string& item, const std::string& flag);
// The lengths of a length file, each an integer >= 1 (a UserError names the line otherwise).
std::vector<int64_t> read_length_file(const std::string& path);

// One compilation of the model to measure (the ablation compiles it once per set of analyses).
struct BenchConfig {
  std::string name;
  std::shared_ptr<const ir::Module> module;
};

// Rows for every configuration; the reference row runs the first configuration's module.
int bench_command(const BenchOptions& options, const std::vector<BenchConfig>& configs,
                  std::shared_ptr<const ParamStore> params, const std::vector<Value>& inputs);

// `acrobat bench --all`: every model of models/ at its sizes (reference, interpreter and AOT engines
// at batch 8 and 64, eager PyTorch), each on its data with the oracle's weights; writes all.md,
// all.json and all.png (speed-up over the reference engine per model) to `out_dir`.
struct BenchAllOptions {
  std::string source_dir;  // the repository (models/, data/, tests/reference/)
  std::string out_dir = "bench/results/all";
  std::string acrobat;     // this executable, for the records
  int reps = 3;
  bool quick = false;      // small sizes, few instances, one repetition (a smoke test)
  std::string table_from;  // the all.json of an earlier run: its table and plot only, nothing measured
};
int bench_all_command(const BenchAllOptions& options);

// `acrobat bench --ragged`: the encoder layer on the length files of data/lengths, acrobat's
// engines beside PyTorch's three strategies (tools/bench_ragged.cpp); ragged.json, ragged.md and
// ragged.png in `out_dir` (the JSON at `json_path` when given). With `train`, the training step of
// the layer under its pooled classifier (the model's `loss_entry`) beside PyTorch's padded and
// sorted training.
struct BenchRaggedOptions {
  std::string source_dir;
  std::string model;                  // default: <source_dir>/models/encoder.acr
  std::string params;                 // safetensors; default: random from `seed`
  std::vector<std::string> lengths;   // names in data/lengths or paths; empty: all of them
  std::vector<size_t> batches = {32, 64, 128};
  std::vector<int> threads = {1, 2};
  std::vector<std::string> engines = {"aot", "batched"};
  std::string out_dir = "bench/results/ragged";
  std::string json_path;
  int reps = 3;
  int batches_per_cell = 2;
  bool dense = true;    // a control cell of equal lengths per cell
  bool pytorch = true;  // the PyTorch rows (and their FLOP count)
  std::string pytorch_json;  // the PyTorch rows from this file (an earlier run's pytorch.json) instead
  bool train = false;   // training steps (forward, backward, Adam) instead of the forward
  std::string loss_entry = "loss";
  double lr = 1e-4;     // Adam's, as bench/ragged_pytorch.py's LEARNING_RATE
  uint64_t seed = 0;
};
int bench_ragged_command(const BenchRaggedOptions& options);

// `acrobat bench --generate`: greedy generation with models/gpt.acr, acrobat's engines beside
// PyTorch's strategies (tools/bench_generate.cpp, bench/generate_pytorch.py); generate.json,
// generate.md and generate.png in `out_dir` (the JSON at `json_path` when given).
struct BenchGenerateOptions {
  std::string source_dir;
  std::string model;                // default: <source_dir>/models/gpt.acr
  std::string params;               // safetensors; default: written by the PyTorch side from `seed`
  std::vector<std::string> sets;    // K=V dims, for both sides
  std::string prompts = "mnli";     // length files (names in data/lengths or paths): the prompts'
  std::string budgets = "mrpc";     // lengths and the budgets of new tokens, line by line
  size_t instances = 128;           // the first lines of both: every cell's instances
  std::vector<size_t> batches = {16, 64, 128};
  std::vector<int> threads = {1, 2};
  std::vector<std::string> engines = {"aot", "batched"};
  std::string out_dir = "bench/results/generate";
  std::string json_path;
  int reps = 3;
  bool pytorch = true;  // PyTorch's rows (without them the weights are acrobat's, random from `seed`)
  uint64_t seed = 0;
};
int bench_generate_command(const BenchGenerateOptions& options);

}  // namespace acrobat
