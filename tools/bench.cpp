// `acrobat bench`: runs a model side by side in one process under the reference engine, the batched
// engine (each scheduler, each batch size) and the AOT engine (each thread count, each batch size),
// for one compilation of the model or, with --ablation, for each set of analyses; next to this run's
// single-thread sgemm throughput as the machine's yardstick and eager PyTorch per instance; prints a
// table and writes JSON. Every figure is the median of --reps repetitions, taken in turns over the
// rows after one warm-up run of each.
#include "bench.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acrobat/kernels.h"
#include "io/files.h"
#include "io/tokens.h"
#include "support/diagnostics.h"
#include "engines/make_engine.h"
#include "support/clock.h"

namespace acrobat {

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU";
  bool avx512 = false;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && name == "unknown CPU") name = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0 && line.find(" avx512f") != std::string::npos) avx512 = true;
  }
  return name + (avx512 ? ", AVX-512" : ", no AVX-512");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string length_file(const std::string& source_dir, const std::string& item, const std::string& flag) {
  if (std::filesystem::exists(item)) return item;
  const std::string dir = source_dir + "/data/lengths";
  const bool named = item.size() > 4 && item.substr(item.size() - 4) == ".txt";
  const std::string path = dir + "/" + item + (named ? "" : ".txt");
  if (!std::filesystem::exists(path))
    throw UserError(flag + ": no length file '" + item + "' (expected a path or a name in " + dir + ")");
  return path;
}

std::vector<int64_t> read_length_file(const std::string& path) {
  std::vector<int64_t> out;
  const auto lines = io::read_token_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].size() != 1 || lines[i][0] < 1)
      throw UserError(SourceLoc{path, static_cast<uint32_t>(i + 1), 1},
                      "expected one length (an integer >= 1) on the line");
    out.push_back(lines[i][0]);
  }
  return out;
}

double gemm_gflops(int reps, bool packed) {
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  auto weights = kernels::pack_weights(n, n, b.data(), n);
  auto once = [&] {
    if (packed)
      kernels::gemm_packed(n, a.data(), n, *weights, c.data(), n, false);
    else
      kernels::gemm(n, n, n, a.data(), n, b.data(), n, c.data(), n, false);
  };
  once();  // warm up (and JIT)
  std::vector<double> rates;
  for (int r = 0; r < std::max(reps, 3); ++r) {
    auto t0 = Clock::now();
    once();
    double s = seconds_since(t0);
    rates.push_back(2.0 * n * n * n / s * 1e-9);
  }
  return median(rates);
}

namespace {


struct Row {
  Row(std::string engine, size_t batch, RunStats stats, int threads, std::string config)
      : engine(std::move(engine)), batch(batch), stats(std::move(stats)), threads(threads),
        config(std::move(config)) {}
  std::string engine;
  size_t batch;
  RunStats stats;  // of the median repetition
  int threads = 1;
  std::string config;  // the analyses (ablation); "" when only one configuration runs
};

// A row to measure: its engine and the runs of its repetitions.
struct Spec {
  Row row;
  std::unique_ptr<Engine> engine;
  size_t batch;  // instances per engine run
  std::vector<RunStats> runs;
};

// The run with the median wall time.
RunStats median_run(std::vector<RunStats> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const RunStats& a, const RunStats& b) { return a.wall_seconds < b.wall_seconds; });
  return runs[runs.size() / 2];
}

std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return status == 0 ? out : "";
}

}  // namespace

namespace {

// Another process that keeps one core busy until destroyed (or until this process dies).
class BusyNeighbour {
 public:
  BusyNeighbour() {
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork for --busy-neighbour");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(0);  // the parent died before the line above
      for (;;) asm volatile("" ::: "memory");  // spin
    }
  }
  ~BusyNeighbour() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BusyNeighbour(const BusyNeighbour&) = delete;
  BusyNeighbour& operator=(const BusyNeighbour&) = delete;

 private:
  pid_t pid_;
};

}  // namespace

int bench_command(const BenchOptions& o, const std::vector<BenchConfig>& configs,
                  std::shared_ptr<const ParamStore> params, const std::vector<Value>& inputs) {
  // Every engine is built first; then each repetition runs every row once, in order, with a
  // yardstick sample before it. Interleaving the repetitions spreads the machine's slow phases
  // (a shared machine's clock and neighbours change during a run) over all rows alike.
  std::vector<Spec> specs;
  auto add = [&](Row row, std::unique_ptr<Engine> engine, size_t batch) {
    specs.push_back(Spec{std::move(row), std::move(engine), batch, {}});
  };
  add(Row("reference", 1, RunStats(), 1, ""), make_engine(EngineSpec{.engine = "reference"}, configs[0].module, params),
      inputs.size());
  bool want_batched = std::find(o.engines.begin(), o.engines.end(), "batched") != o.engines.end();
  bool want_aot = std::find(o.engines.begin(), o.engines.end(), "aot") != o.engines.end();
  bool several = configs.size() > 1;
  for (const BenchConfig& c : configs) {
    std::string config = several ? c.name : "";
    for (int threads : want_batched ? o.threads : std::vector<int>{})
      for (const auto& name : o.schedulers)
        for (size_t batch : o.batches)
          add(Row(name, batch, RunStats(), threads, config),
              make_engine({.engine = "batched", .threads = threads, .scheduler = parse_scheduler(name)}, c.module, params),
              batch);
    for (int threads : want_aot ? o.threads : std::vector<int>{}) {
      for (const auto& name : o.schedulers) {
        const EngineSpec spec{.engine = "aot", .threads = threads, .scheduler = parse_scheduler(name),
                              .cache_dir = o.aot_cache_dir};
        std::string label = spec.scheduler == Scheduler::InlineDepth ? "aot" : "aot-" + name;
        for (size_t batch : o.batches)
          add(Row(label, batch, RunStats(), threads, config), make_engine(spec, c.module, params), batch);
      }
    }
  }
  std::optional<BusyNeighbour> neighbour;
  if (o.busy_neighbour) neighbour.emplace();
  // One unmeasured run of every batched row first: libxsmm JIT-compiles its kernels per thread on
  // first use, and the arenas grow to their size.
  for (size_t i = 1; i < specs.size(); ++i) {
    std::cerr << fmt::format("\rbench: warm-up, row {}/{}   ", i + 1, specs.size()) << std::flush;
    specs[i].engine->run_batches(inputs, specs[i].batch);
  }
  std::vector<double> sgemm_samples, packed_samples;
  for (int r = 0; r < o.reps; ++r) {
    sgemm_samples.push_back(gemm_gflops(3, false));
    packed_samples.push_back(gemm_gflops(3, true));
    for (size_t i = 0; i < specs.size(); ++i) {
      std::cerr << fmt::format("\rbench: repetition {}/{}, row {}/{}   ", r + 1, o.reps, i + 1,
                               specs.size())
                << std::flush;
      specs[i].runs.push_back(specs[i].engine->run_batches(inputs, specs[i].batch).stats);
    }
  }
  neighbour.reset();
  std::vector<Row> rows;
  for (auto& spec : specs) {
    spec.row.stats = median_run(spec.runs);
    rows.push_back(spec.row);
  }
  double yardstick = median(sgemm_samples);
  double packed_gemm = median(packed_samples);

  // Eager PyTorch, per instance, on the same data (the FLOPs per instance are acrobat's count).
  if (!o.pytorch_model.empty()) {
    std::cerr << "\rbench: PyTorch eager (" << o.pytorch_limit << " instances)                  \n";
    std::string cmd = "/usr/bin/python3 " + io::shell_quote(o.pytorch_script) + " --model " +
                      io::shell_quote(o.pytorch_model) + " --data " + io::shell_quote(o.data_path) +
                      " --limit " + std::to_string(o.pytorch_limit) + " --reps " +
                      std::to_string(o.reps);
    if (!o.vocab_path.empty()) cmd += " --vocab " + io::shell_quote(o.vocab_path);
    for (const auto& s : o.sets) cmd += " --set " + io::shell_quote(s);
    if (!o.pytorch_params.empty()) cmd += " --params " + io::shell_quote(o.pytorch_params);
    std::string out = run_capture(cmd + " 2>/dev/null");
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_object() && j.contains("instances_per_s")) {
      RunStats s;
      double ips = j["instances_per_s"].get<double>();
      s.instances = 1;
      s.wall_seconds = ips > 0 ? 1.0 / ips : 0;
      s.flops = rows[0].stats.instances ? rows[0].stats.flops / rows[0].stats.instances : 0;
      rows.push_back(Row("pytorch", 1, s, 1, ""));
    } else {
      std::cerr << "bench: PyTorch eager run failed; no pytorch row (command: " << cmd << ")\n";
    }
  }
  std::cerr << "\r" << std::string(60, ' ') << "\r";

  double ref_ips = rows[0].stats.instances_per_second();
  std::cout << fmt::format("{} on {} instances, medians of {} repetitions; one thread: OpenBLAS "
                           "sgemm 1024^3 {:.1f} GFLOP/s (the yardstick; median of {} samples taken "
                           "between the rows, {:.1f}-{:.1f}), packed-weight GEMM {:.1f}{}\n",
                           o.model, inputs.size(), o.reps, yardstick, sgemm_samples.size(),
                           *std::min_element(sgemm_samples.begin(), sgemm_samples.end()),
                           *std::max_element(sgemm_samples.begin(), sgemm_samples.end()), packed_gemm,
                           o.busy_neighbour ? "; another process kept one core busy during the rows"
                                            : "");
  if (several) std::cout << fmt::format("{:<20} ", "analyses");
  std::cout << fmt::format("{:<13} {:>7} {:>6} {:>11} {:>9} {:>8} {:>9} {:>9} {:>10} {:>10}\n",
                           "engine", "threads", "batch", "inst/s", "vs ref", "GFLOP/s", "% sgemm", "overhead",
                           "mean batch", "peak MiB");
  nlohmann::json results = nlohmann::json::array();
  for (const Row& r : rows) {
    const RunStats& s = r.stats;
    bool batched = r.engine != "reference" && r.engine != "pytorch";
    if (several) std::cout << fmt::format("{:<20} ", r.config.empty() ? "-" : r.config);
    std::cout << fmt::format(
        "{:<13} {:>7} {:>6} {:>11.1f} {:>8.2f}x {:>8.2f} {:>8.1f}% {:>9} {:>10} {:>10}\n", r.engine,
        r.threads, r.engine == "reference" || r.engine == "pytorch" ? std::string("1") : std::to_string(r.batch),
        s.instances_per_second(), ref_ips > 0 ? s.instances_per_second() / ref_ips : 0,
        s.useful_gflops(), 100 * s.useful_gflops() / yardstick,
        batched ? fmt::format("{:.1f}%", 100 * s.overhead_fraction()) : "-",
        batched ? fmt::format("{:.1f}", s.mean_batch_size()) : "-",
        batched ? fmt::format("{:.1f}", s.peak_bytes / 1048576.0) : "-");
    nlohmann::json e = {{"engine", r.engine},
                        {"analyses", r.config},
                        {"threads", r.threads},
                        {"batch", r.engine == "reference" || r.engine == "pytorch" ? 1 : r.batch},
                        {"instances_per_s", s.instances_per_second()},
                        {"useful_gflops", s.useful_gflops()}};
    e["overhead_fraction"] = batched ? nlohmann::json(s.overhead_fraction()) : nlohmann::json();
    e["mean_batch_size"] = batched ? nlohmann::json(s.mean_batch_size()) : nlohmann::json(1.0);
    e["peak_bytes"] = batched ? nlohmann::json(s.peak_bytes) : nlohmann::json();
    results.push_back(e);
  }
  if (!o.json_path.empty()) {
    nlohmann::json out = {{"model", o.model},
                          {"dims", o.sets},
                          {"instances", inputs.size()},
                          {"reps", o.reps},
                          {"busy_neighbour", o.busy_neighbour},
                          {"sgemm_gflops", yardstick},
                          {"sgemm_gflops_samples", sgemm_samples},
                          {"packed_gemm_gflops", packed_gemm},
                          {"results", results}};
    io::write_file(o.json_path, out.dump(2) + "\n");
  }
  return 0;
}

}  // namespace acrobat
