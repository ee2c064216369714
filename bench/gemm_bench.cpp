// Measures every GEMM path against plain OpenBLAS sgemm, and the fast transcendental kernels
// against libm, on this machine. choose_gemm_path's thresholds come from the table this prints.
// --decode: the weight products of one decode step of models/gpt.acr against their roofline.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acrobat/kernels.h"
#include "kernels/backend.h"

namespace acrobat::kernels {
// Defined in src/kernels/gemm.cpp, not in kernels.h: the Xsmm path as it was before row blocking
// and the N <= 8 dot-product kernel (one libxsmm kernel over all M rows of every panel).
void gemm_packed_xsmm_unblocked_for_bench(int M, const float* A, int lda, const PackedWeights& W,
                                          float* C, int ldc, bool accumulate);
}  // namespace acrobat::kernels

namespace {

namespace kernels = acrobat::kernels;
using kernels::GemmPath;
using Clock = std::chrono::steady_clock;

struct Timing {
  int reps;                           // measurements; the median is reported
  std::chrono::nanoseconds min_time;  // each measurement repeats the call at least this long
};

// Keeps the compiler from dropping work whose result is never read.
void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

// Median seconds per call of each function. The functions are timed round-robin, one measurement of
// each per round, so that load from other processes on a shared machine hits all of them alike and
// their ratios stay meaningful even when absolute numbers drift.
std::vector<double> time_calls(const Timing& timing, const std::vector<std::function<void()>>& fs) {
  // Calibrate how many calls of each fill min_time, so short calls are not dominated by clock
  // reads. The first calls also warm up JIT dispatch, page faults and caches.
  std::vector<int> iters;
  for (const auto& f : fs) {
    int n = 1;
    for (;;) {
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) f();
      if (Clock::now() - t0 >= timing.min_time / 4 || n >= (1 << 20)) break;
      n *= 2;
    }
    iters.push_back(n * 4);
  }
  std::vector<std::vector<double>> samples(fs.size());
  for (int r = 0; r < timing.reps; ++r) {
    for (size_t k = 0; k < fs.size(); ++k) {
      const auto t0 = Clock::now();
      for (int i = 0; i < iters[k]; ++i) fs[k]();
      samples[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters[k]);
    }
  }
  std::vector<double> medians;
  for (auto& s : samples) {
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

std::vector<float> random_floats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct GemmRow {
  int M, K, N;
  std::optional<double> gemv;  // only measured for M == 1
  double xsmm_old, xsmm, blas, chosen, cblas;
  GemmPath chosen_path;
};

GemmRow bench_gemm(const Timing& timing, int M, int K, int N) {
  const auto A = random_floats(size_t(M) * K, -1, 1, 1);
  const auto B = random_floats(size_t(K) * N, -1, 1, 2);
  std::vector<float> C(size_t(M) * N);
  const auto W = kernels::pack_weights(K, N, B.data(), N);
  auto via = [&](GemmPath path) {
    return [&, path] {
      kernels::gemm_packed_via(path, M, A.data(), K, *W, C.data(), N, false);
      escape(C.data());
    };
  };
  std::vector<std::function<void()>> fs = {
      [&] {
        kernels::gemm_packed_xsmm_unblocked_for_bench(M, A.data(), K, *W, C.data(), N, false);
        escape(C.data());
      },
      via(GemmPath::Xsmm),
      via(GemmPath::Blas),
      [&] {
        kernels::gemm_packed(M, A.data(), K, *W, C.data(), N, false);
        escape(C.data());
      },
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A.data(), K, B.data(),
                    N, 0.0f, C.data(), N);
        escape(C.data());
      },
  };
  if (M == 1) fs.push_back(via(GemmPath::Gemv));
  // The first call of a new M pays for the JIT; time_calls' calibration makes every call below warm.
  const std::vector<double> seconds = time_calls(timing, fs);
  auto gflops = [&](size_t k) { return 2.0 * M * N * K / seconds[k] * 1e-9; };

  GemmRow row{M,
              K,
              N,
              std::nullopt,
              gflops(0),
              gflops(1),
              gflops(2),
              gflops(3),
              gflops(4),
              kernels::choose_gemm_path(M, N, K)};
  if (M == 1) row.gemv = gflops(5);
  return row;
}

struct UnaryCase {
  const char* name;
  void (*fast)(const float*, float*, size_t);
  float (*libm)(float);
  float lo, hi;  // input range
};

struct UnaryRow {
  const char* name;
  double fast_ns, libm_ns;  // per element
};

UnaryRow bench_unary(const Timing& timing, const UnaryCase& c) {
  constexpr size_t kN = size_t(1) << 16;
  const auto x = random_floats(kN, c.lo, c.hi, 3);
  std::vector<float> y(kN);
  auto run_fast = [&] {
    c.fast(x.data(), y.data(), kN);
    escape(y.data());
  };
  auto run_libm = [&] {
    for (size_t i = 0; i < kN; ++i) y[i] = c.libm(x[i]);
    escape(y.data());
  };
  const std::vector<double> seconds = time_calls(timing, {run_fast, run_libm});
  return {c.name, seconds[0] * 1e9 / kN, seconds[1] * 1e9 / kN};
}

// --decode: the weight products of one decode step of models/gpt.acr at its default dims (D 512,
// FF 2048, 6 layers, V 4096): per layer x @ Wqkv [512, 1536], @ Wo [512, 512], @ W1 [512, 2048],
// @ W2 [2048, 512], then the logits' @ Wout [512, 4096], M rows each (the instances at the step).
// "cold": one product per matrix as a step runs them, every matrix (84 MiB in all) read from memory
// again since the other 24 went through the caches; "warm": each product repeated 8 times in a
// row, so all but its first run find the matrix in the caches (the kernel's own speed on these
// shapes). Bound: the longer of the FLOPs at the FMA peak and the matrices' bytes at the read
// bandwidth of one thread, what bench --generate's decode bound counts for the weights.
void bench_decode(const Timing& timing, double peak, nlohmann::json& json) {
  struct Weight {
    int K, N;
    std::shared_ptr<kernels::PackedWeights> packed;
  };
  std::vector<Weight> weights;
  unsigned seed = 10;
  auto add = [&](int K, int N) {
    const auto B = random_floats(size_t(K) * N, -0.05f, 0.05f, seed++);
    weights.push_back({K, N, kernels::pack_weights(K, N, B.data(), N)});
  };
  for (int layer = 0; layer < 6; ++layer) {
    add(512, 1536);
    add(512, 512);
    add(512, 2048);
    add(2048, 512);
  }
  add(512, 4096);
  const double bandwidth = kernels::read_bandwidth_gbs(1);
  fmt::print("\nDecode step of gpt.acr: its 25 weight products at M rows (84 MiB of weights); read "
             "bandwidth {:.1f} GB/s\n",
             bandwidth);
  fmt::print("    M | cold ms  GFLOP/s  of peak | warm GFLOP/s  of peak | bound ms (compute, memory) | "
             "cold x bound\n");
  for (int M : {1, 4, 8, 16, 32, 42, 64, 128}) {
    const auto A = random_floats(size_t(M) * 2048, -1, 1, 1);
    std::vector<float> C(size_t(M) * 4096);
    double flops = 0, bytes = 0;
    for (const Weight& w : weights) {
      flops += 2.0 * M * w.K * w.N;
      bytes += 4.0 * w.K * w.N;
    }
    auto step = [&](int repeats) {
      return [&, repeats] {
        for (const Weight& w : weights)
          for (int r = 0; r < repeats; ++r) kernels::gemm_packed(M, A.data(), w.K, *w.packed, C.data(), w.N, false);
        escape(C.data());
      };
    };
    const std::vector<double> seconds = time_calls(timing, {step(1), step(8)});
    const double cold = seconds[0], warm = seconds[1] / 8;
    const double compute = flops / peak * 1e-9, memory = bytes / bandwidth * 1e-9;
    const double bound = std::max(compute, memory);
    fmt::print("{:5} | {:7.3f} {:8.1f} {:7.0f}% | {:12.1f} {:7.0f}% | {:8.3f} ({:.3f}, {:.3f})    | {:12.2f}\n", M,
               cold * 1e3, flops / cold * 1e-9, 100 * flops / cold * 1e-9 / peak, flops / warm * 1e-9,
               100 * flops / warm * 1e-9 / peak, bound * 1e3, compute * 1e3, memory * 1e3, cold / bound);
    json["decode_step"].push_back({{"M", M},
                                   {"cold_seconds", cold},
                                   {"cold_gflops", flops / cold * 1e-9},
                                   {"warm_gflops", flops / warm * 1e-9},
                                   {"bound_seconds", bound},
                                   {"compute_seconds", compute},
                                   {"memory_seconds", memory},
                                   {"read_bandwidth_gbs", bandwidth}});
  }
}

// Writes `json` to `path` (nothing when empty); the exit status.
int write_json(const std::string& path, const nlohmann::json& json) {
  if (path.empty()) return 0;
  std::ofstream out(path);
  out << json.dump(2) << '\n';
  if (!out) {
    fmt::print(stderr, "error: cannot write {}\n", path);
    return 1;
  }
  return 0;
}

std::string cell(std::optional<double> v) { return v ? fmt::format("{:7.1f}", *v) : "      -"; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Benchmarks the GEMM paths and fast elementwise kernels (single thread)."};
  bool quick = false;
  std::string json_path;
  app.add_flag("--quick", quick, "fewer, shorter repetitions");
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  int reps = 0;
  app.add_option("--reps", reps, "measurements per function (median reported; default 11, 5 quick)");
  bool tree_only = false;
  app.add_flag("--tree-only", tree_only, "only the Tree-LSTM GEMM shapes, no elementwise kernels");
  bool decode = false;
  app.add_flag("--decode", decode,
               "only the weight products of a decode step of models/gpt.acr, cold and warm, against their "
               "roofline");
  CLI11_PARSE(app, argc, argv);

  const Timing timing =
      quick ? Timing{reps > 0 ? reps : 5, std::chrono::milliseconds(2)}
            : Timing{reps > 0 ? reps : 11, std::chrono::milliseconds(10)};
  const double peak = kernels::fma_peak_gflops();
  fmt::print("{}; single thread; median of {} runs; this core's fp32 FMA peak {:.1f} GFLOP/s\n\n",
             kernels::backend_description(), timing.reps, peak);

  nlohmann::json json;
  json["fma_peak_gflops"] = peak;
  if (decode) {
    bench_decode(timing, peak, json);
    return write_json(json_path, json);
  }

  std::vector<std::array<int, 3>> shapes;  // M, K, N
  for (int M : {1, 8, 16, 32, 64, 128, 256, 512}) {
    if (tree_only) break;
    for (auto [K, N] : {std::pair{256, 1024}, {512, 2048}, {256, 1280}, {512, 2560}, {512, 512}}) {
      shapes.push_back({M, K, N});
    }
  }
  // The Tree-LSTM's shapes: every batch size occurs, gate GEMMs (K,N = 512,1280 and 256,768) and
  // the classifier (N = 5).
  for (int M : {4, 8, 16, 32, 64, 100, 128, 256, 512, 1000, 1300, 2000}) {
    for (auto [K, N] : {std::pair{256, 768}, {512, 1280}, {256, 5}}) shapes.push_back({M, K, N});
  }
  if (!tree_only) shapes.push_back({1024, 1024, 1024});
  // Deep K, where a K x 128 panel no longer fits comfortably in L2 and the Xsmm/Blas crossover lies.
  for (int M : {16, 64, 256}) {
    if (tree_only) break;
    for (int K : {2048, 3072, 4096}) shapes.push_back({M, K, 1024});
  }

  fmt::print("GEMM GFLOP/s, C[M,N] = A[M,K] W[K,N]; paths on packed W, cblas_sgemm on plain W\n");
  fmt::print("xsmm-old: the Xsmm path before row blocking and the N <= 8 dot kernel; new/old = xsmm\n");
  fmt::print("    M     K     N |    gemv xsmm-old    xsmm new/old    blas | chosen         | "
             "cblas_sgemm\n");
  for (const auto& [M, K, N] : shapes) {
    const GemmRow r = bench_gemm(timing, M, K, N);
    fmt::print("{:5} {:5} {:5} | {}  {:7.1f} {:7.1f}  {:5.2f}  {:7.1f} | {:<4} {:7.1f}   | {:7.1f}\n",
               r.M, r.K, r.N, cell(r.gemv), r.xsmm_old, r.xsmm, r.xsmm / r.xsmm_old, r.blas,
               kernels::gemm_path_name(r.chosen_path), r.chosen, r.cblas);
    nlohmann::json j = {{"M", r.M},
                        {"K", r.K},
                        {"N", r.N},
                        {"xsmm_old", r.xsmm_old},
                        {"xsmm", r.xsmm},
                        {"blas", r.blas},
                        {"chosen_path", kernels::gemm_path_name(r.chosen_path)},
                        {"chosen", r.chosen},
                        {"cblas_sgemm", r.cblas}};
    if (r.gemv) j["gemv"] = *r.gemv;
    json["gemm_gflops"].push_back(j);
  }

  // Plain B: both operands per instance (attention q k^T and a v, MV-RNN's phrase matrices), so B
  // is not packed. One JIT kernel reading B in place against cblas_sgemm.
  fmt::print("\nGEMM GFLOP/s on a plain B (not packed)\n");
  fmt::print("    M     K     N |    xsmm    blas  xsmm/blas | chosen\n");
  std::vector<std::array<int, 3>> plain_shapes = {
      {4, 64, 64},    {16, 64, 64},    {64, 64, 64},    {64, 128, 64},    {64, 64, 128},
      {128, 64, 128}, {128, 128, 64},  {64, 64, 256},   {256, 256, 256},  {512, 512, 512},
      {1024, 1024, 1024}};
  if (tree_only) plain_shapes.clear();
  for (const auto& [M, K, N] : plain_shapes) {
    const auto A = random_floats(size_t(M) * K, -1, 1, 1);
    const auto B = random_floats(size_t(K) * N, -1, 1, 2);
    std::vector<float> C(size_t(M) * N);
    auto via = [&](GemmPath path) {
      return [&, path] {
        kernels::gemm_via(path, M, N, K, A.data(), K, B.data(), N, C.data(), N, false);
        escape(C.data());
      };
    };
    const std::vector<double> seconds = time_calls(timing, {via(GemmPath::Xsmm), via(GemmPath::Blas)});
    const double xsmm = 2.0 * M * N * K / seconds[0] * 1e-9, blas = 2.0 * M * N * K / seconds[1] * 1e-9;
    const GemmPath chosen = kernels::choose_plain_gemm_path(M, N, K);
    fmt::print("{:5} {:5} {:5} | {:7.1f} {:7.1f}  {:9.2f} | {}\n", M, K, N, xsmm, blas, xsmm / blas,
               kernels::gemm_path_name(chosen));
    json["plain_gemm_gflops"].push_back(
        {{"M", M}, {"K", K}, {"N", N}, {"xsmm", xsmm}, {"blas", blas},
         {"chosen_path", kernels::gemm_path_name(chosen)}});
  }

  // A weight's gradient over a batch's rows: dW[M, N] += X^T dY, X [K rows, M], dY [K rows, N] (a
  // [512, 512] block of an encoder's weight); the last column is kernels::weight_gradient_path.
  if (tree_only) return 0;
  fmt::print("\nWeight gradient GFLOP/s, C[M,N] += A^T B over K rows (A stored [K, M])\n");
  fmt::print("    M     K     N |     jit  packed    blas  packed/blas | gemm_strided takes\n");
  for (int K : {256, 1024, 4096, 16384}) {
    const int M = 512, N = 512;
    const auto A = random_floats(size_t(K) * M, -1, 1, 1);
    const auto B = random_floats(size_t(K) * N, -1, 1, 2);
    std::vector<float> C(size_t(M) * N);
    bool jit_ok = true;
    const std::vector<double> seconds = time_calls(
        timing, {[&] {
                   jit_ok = kernels::gemm_at_jit(M, N, K, A.data(), M, B.data(), N, C.data(), N, true) && jit_ok;
                   escape(C.data());
                 },
                 [&] {
                   kernels::gemm_at_packed(M, N, K, A.data(), M, B.data(), N, C.data(), N, true);
                   escape(C.data());
                 },
                 [&] {
                   cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, 1.0f, A.data(), M, B.data(), N,
                               1.0f, C.data(), N);
                   escape(C.data());
                 }});
    const double flops = 2.0 * M * N * K * 1e-9;
    const double jit = jit_ok ? flops / seconds[0] : 0, packed = flops / seconds[1], blas = flops / seconds[2];
    const char* taken = kernels::weight_gradient_path_name(kernels::weight_gradient_path(N, K, jit_ok));
    fmt::print("{:5} {:5} {:5} | {:>7} {:7.1f} {:7.1f}  {:11.2f} | {}\n", M, K, N,
               jit_ok ? fmt::format("{:.1f}", jit) : "no JIT", packed, blas, packed / blas, taken);
    json["weight_gradient_gflops"].push_back(
        {{"M", M}, {"K", K}, {"N", N}, {"jit", jit}, {"packed", packed}, {"blas", blas}, {"taken", taken}});
  }

  fmt::print("\nElementwise ns/element on 1<<16 random floats in [-10, 10] ((0, 10] for log)\n");
  fmt::print("  function |  acrobat |     libm\n");
  const UnaryCase unary_cases[] = {
      {"tanh", kernels::tanh, [](float x) { return std::tanh(x); }, -10, 10},
      {"sigmoid", kernels::sigmoid, [](float x) { return 1.0f / (1.0f + std::exp(-x)); }, -10, 10},
      {"exp", kernels::exp, [](float x) { return std::exp(x); }, -10, 10},
      {"log", kernels::log, [](float x) { return std::log(x); }, 1e-6f, 10},
  };
  for (const UnaryCase& c : unary_cases) {
    const UnaryRow r = bench_unary(timing, c);
    fmt::print("  {:>8} | {:8.3f} | {:8.3f}\n", r.name, r.fast_ns, r.libm_ns);
    json["elementwise_ns_per_element"].push_back(
        {{"function", r.name}, {"acrobat", r.fast_ns}, {"libm", r.libm_ns}});
  }

  return write_json(json_path, json);
}
