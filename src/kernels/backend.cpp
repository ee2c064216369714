// Process-wide setup of OpenBLAS and libxsmm: single-threaded BLAS, a usable OpenBLAS core on CPUs
// it does not recognise, and libxsmm's JIT initialised up front.
#include "kernels/backend.h"

#include <cblas.h>
#include <libxsmm.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernels/simd.h"
#include "support/clock.h"

// OpenBLAS's core selection, exported by builds with DYNAMIC_ARCH (Debian's) but in no header; weak
// so that a build without it still links and simply skips the core fix below.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace acrobat::kernels {
namespace {

// OpenBLAS 0.3.21 picks its kernels by CPU model number and falls back to the generic SSE3
// "Prescott" kernels for models it does not know, such as this machine's Xeon (family 6, model
// 207): sgemm then runs at ~20 instead of ~105 GFLOP/s. On such a fallback, re-run its selection
// with the newest kernel set the CPU's instruction set supports, unless the user forced a core
// through OPENBLAS_CORETYPE themselves. The choice stays in the environment, so that the processes
// started from here (the PyTorch baselines of the benchmarks) run the same sgemm;
// tests/reference/torch_threads.py applies the same rule to a baseline started on its own.
void fix_openblas_core() {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return;
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) {
    core = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    core = "Haswell";
  } else {
    return;
  }
  setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
}

bool init_backend() {
  fix_openblas_core();
  // The runtime owns threading: it runs independent work on its own threads, one per core. A
  // multi-threaded BLAS would oversubscribe them, and its spinning worker threads collapse
  // throughput whenever the other core is busy, so every sgemm/sgemv runs on the calling thread.
  openblas_set_num_threads(1);
  // libxsmm_init() sets OMP_PROC_BIND=TRUE in the environment when no affinity variable is set
  // (Debian builds it with LIBXSMM_AUTOPIN). Left there, any OpenMP runtime started later in the
  // process (PyTorch's, after `import acrobat`) pins the main thread to the first core, and every
  // process started from there inherits that one core. The runtime pins nothing itself: take the
  // variable back out unless the user had set it.
  const bool proc_bind_set = std::getenv("OMP_PROC_BIND") != nullptr;
  libxsmm_init();
  if (!proc_bind_set) unsetenv("OMP_PROC_BIND");
  return true;
}

// Also run before main, while the process is still single-threaded, since fix_openblas_core()
// touches the environment; ensure_backend_ready() covers calls from other static initialisers.
[[maybe_unused]] const bool backend_ready_at_startup = (ensure_backend_ready(), true);

}  // namespace

void ensure_backend_ready() {
  static const bool ready = init_backend();
  (void)ready;
}

bool blas_narrower_than_jit() {
  static const bool narrower = [] {
    ensure_backend_ready();
    // OpenBLAS 0.3.21's AVX-512 kernel sets (a newer OpenBLAS may name more: they count as narrower
    // until listed here, which costs at most the difference between two AVX-512 GEMMs).
    const char* core = openblas_get_corename();
    const bool blas_avx512 = std::strcmp(core, "SkylakeX") == 0 || std::strcmp(core, "Cooperlake") == 0 ||
                             std::strcmp(core, "SapphireRapids") == 0;
    return !blas_avx512 && libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512_CORE;
  }();
  return narrower;
}

std::string backend_description() {
  ensure_backend_ready();
  return fmt::format("OpenBLAS {} core, libxsmm {} target{}", openblas_get_corename(), libxsmm_get_target_arch(),
                     blas_narrower_than_jit() ? " (weight gradients A^T B on libxsmm: OpenBLAS's core is narrower)" : "");
}

double fma_peak_gflops(double seconds) {
  namespace simd = acrobat::kernels::simd;
  // Twelve independent accumulators, each its own variable so that it lives in a register, cover
  // the FMA latency (4 cycles) times the issue width (2 per cycle) of current cores with room to
  // spare; the empty asm keeps every FMA and stops the compiler from reassociating the chains.
  constexpr int kChains = 12, kRounds = 1 << 14;
  const simd::Vec a = simd::splat(0.999999f), b = simd::splat(1e-7f);
  simd::Vec c0 = simd::splat(1.0f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
            c8 = c0, c9 = c0, c10 = c0, c11 = c0;
  double best = 0;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    for (int r = 0; r < kRounds; ++r) {
      for (simd::Vec* c : {&c0, &c1, &c2, &c3, &c4, &c5, &c6, &c7, &c8, &c9, &c10, &c11}) {
        *c = simd::fmadd(*c, a, b);
        asm volatile("" : "+x"(c->v));
      }
    }
    const double s = seconds_since(t0);
    best = std::max(best, 2.0 * simd::kLanes * kChains * kRounds / s * 1e-9);
  } while (seconds_since(start) < seconds);
  for (const simd::Vec& c : {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11}) asm volatile("" : : "x"(c.v));
  return best;
}

double read_bandwidth_gbs(int threads, double seconds) {
  namespace simd = acrobat::kernels::simd;
  constexpr size_t kFloats = size_t{64} << 20;  // 256 MiB
  threads = std::max(threads, 1);
  std::unique_ptr<float[]> data(new float[kFloats]);
  std::fill_n(data.get(), kFloats, 1.0f);  // touched: no page faults in the timed loop
  const size_t part = kFloats / size_t(threads) / (4 * simd::kLanes) * (4 * simd::kLanes);
  auto sum = [&](size_t t) {
    const float* p = data.get() + t * part;
    simd::Vec s0 = simd::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < part; i += 4 * simd::kLanes) {
      s0 = s0 + simd::load(p + i);
      s1 = s1 + simd::load(p + i + simd::kLanes);
      s2 = s2 + simd::load(p + i + 2 * simd::kLanes);
      s3 = s3 + simd::load(p + i + 3 * simd::kLanes);
    }
    for (const simd::Vec& c : {s0, s1, s2, s3}) asm volatile("" : : "x"(c.v));
  };
  double best = 0;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) workers.emplace_back(sum, size_t(t));
    sum(0);
    for (std::thread& w : workers) w.join();
    const double s = seconds_since(t0);
    best = std::max(best, double(part) * double(threads) * sizeof(float) / s * 1e-9);
  } while (seconds_since(start) < seconds);
  return best;
}

}  // namespace acrobat::kernels
