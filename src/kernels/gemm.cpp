// GEMM: weight packing, the three execution paths (OpenBLAS sgemv, libxsmm JIT kernels over packed
// column panels, OpenBLAS sgemm) and the dispatcher that picks one by rules measured with
// gemm_bench.
#include <cblas.h>
#include <libxsmm.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "acrobat/kernels.h"
#include "kernels/backend.h"
#include "kernels/gemm_few_rows.h"
#include "kernels/gemm_thin.h"
#include "kernels/simd.h"  // and <immintrin.h>
#include "support/diagnostics.h"

namespace acrobat::kernels {
namespace {

// Width of the column panels the JIT kernels run over. A K x 128 panel is one kernel's whole B
// operand, which stays in L2 (K = 512: 256 KiB) while the kernel streams the rows of A past it.
constexpr int kPanelWidth = 128;
constexpr size_t kAlignment = 64;  // a cache line, and an AVX-512 register

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

AlignedFloats allocate_aligned(size_t count) {
  // aligned_alloc wants a size that is a multiple of the alignment, and a non-zero one.
  const size_t bytes =
      std::max(kAlignment, (count * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedFloats(static_cast<float*>(p));
}

class CpuPackedWeights final : public PackedWeights {
 public:
  // B[K, N] of row stride ldb, or (transposed) B = W^T for W[N, K] of row stride ldb; `in_place`:
  // the row-major paths read B itself rather than a copy (always so from a transpose).
  CpuPackedWeights(int K, int N, const float* B, int ldb, bool transposed, bool in_place)
      : k_(K), n_(N), in_place_(in_place), panels_(allocate_aligned(size_t(K) * N)) {
    if (N <= kDotMaxN) {
      transposed_ld_ = (K + kDotKStep - 1) / kDotKStep * kDotKStep;
      transposed_ = allocate_aligned(size_t(N) * transposed_ld_);
      std::fill_n(transposed_.get(), size_t(N) * transposed_ld_, 0.0f);
    }
    pack(B, ldb, transposed);
  }

  void repack(const float* B, int ldb) override { pack(B, ldb, false); }
  void repack_transposed(const float* W, int ldw) override { pack(W, ldw, true); }

  // B[k, n] is src[k * ld + n], or src[n * ld + k] when `transposed`.
  void pack(const float* src, int ld, bool transposed) {
    const int K = k_, N = n_;
    if (transposed_) {
      // W^T, N rows of K zero-padded to a whole number of vectors (the dot-product kernel).
      for (int n = 0; n < N; ++n) {
        float* row = transposed_.get() + size_t(n) * transposed_ld_;
        if (transposed)
          std::memcpy(row, src + size_t(n) * ld, sizeof(float) * K);
        else
          for (int k = 0; k < K; ++k) row[k] = src[size_t(k) * ld + n];
      }
    }
    if (transposed || in_place_) {
      // The row-major paths read the caller's matrix (W as B^T, or B); only the panels are a copy.
      rows_ = {src, ld, transposed};
    } else {
      if (!row_major_) row_major_ = allocate_aligned(size_t(K) * N);
      for (int k = 0; k < K; ++k) std::memcpy(row_major_.get() + size_t(k) * N, src + size_t(k) * ld, sizeof(float) * N);
      rows_ = {row_major_.get(), N, false};
    }
    // Panel p holds columns [128p, 128p + width) as a contiguous row-major K x width block, which
    // is exactly a column-major width x K matrix (Bpanel^T) with leading dimension width.
    for (int p = 0; p < num_panels(); ++p) {
      float* dst = panels_.get() + panel_offset(p);
      const int width = panel_width(p);
      if (transposed) {
        transpose_2d(src + size_t(p) * kPanelWidth * ld, ld, dst, width, width, K);
        continue;
      }
      for (int k = 0; k < K; ++k)
        std::memcpy(dst + size_t(k) * width, src + size_t(k) * ld + size_t(p) * kPanelWidth, sizeof(float) * width);
    }
  }

  int K() const override { return k_; }
  int N() const override { return n_; }

  // B for the row-major paths: B itself (K x N), or B^T (N x K, `transposed`) in the caller's memory.
  struct Rows {
    const float* data;
    int ld;
    bool transposed;
  };
  const Rows& rows() const { return rows_; }
  int num_panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  int panel_width(int p) const { return std::min(kPanelWidth, n_ - p * kPanelWidth); }
  const float* panel(int p) const { return panels_.get() + panel_offset(p); }
  // W^T (N x transposed_ld(), zero-padded rows, 64-byte aligned) when N <= kDotMaxN, else null.
  const float* transposed() const { return transposed_.get(); }
  int transposed_ld() const { return transposed_ld_; }

 private:
  // Every panel but the last is full width, so panel p starts after p full panels; K * 128 floats
  // is a multiple of 64 bytes, so every panel stays aligned.
  size_t panel_offset(int p) const { return size_t(p) * k_ * kPanelWidth; }

  int k_;
  int n_;
  bool in_place_;
  AlignedFloats row_major_;  // B's row-major copy (none when read in place)
  Rows rows_{nullptr, 0, false};
  AlignedFloats panels_;
  AlignedFloats transposed_;
  int transposed_ld_ = 0;
};

const CpuPackedWeights& cpu_weights(const PackedWeights& W) {
  const auto* cpu = dynamic_cast<const CpuPackedWeights*>(&W);
  ACROBAT_ASSERT(cpu != nullptr, "PackedWeights not made by kernels::pack_weights");
  return *cpu;
}

// BLAS rejects zero sizes in leading dimensions, and a K == 0 product must still clear C.
bool trivial_gemm(int M, int N, int K, float* C, int ldc, bool accumulate) {
  if (M > 0 && N > 0 && K > 0) return false;
  if (!accumulate && N > 0) {
    for (int m = 0; m < M; ++m) std::fill_n(C + size_t(m) * ldc, N, 0.0f);
  }
  return true;
}

void check_gemm_args(int M, int N, int K, int lda, int ldb, int ldc) {
  ACROBAT_ASSERT(M >= 0 && N >= 0 && K >= 0, "negative GEMM dimension");
  ACROBAT_ASSERT(lda >= K && ldb >= N && ldc >= N, "GEMM leading dimension smaller than the row");
}

// One sgemv per row of A: the M == 1 path, and correct (if slow) for any M.
// `transposed_b`: B is given as B^T, an N x K row-major matrix of row stride ldb.
void gemm_gemv(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
               int ldc, bool accumulate, bool transposed_b = false) {
  const float beta = accumulate ? 1.0f : 0.0f;
  for (int m = 0; m < M; ++m) {
    // Row-major C[1,N] = A[1,K] B[K,N] is y = B^T x with B as a K x N row-major matrix.
    if (transposed_b)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, B, ldb, A + size_t(m) * lda, 1, beta,
                  C + size_t(m) * ldc, 1);
    else
      cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, B, ldb, A + size_t(m) * lda, 1, beta,
                  C + size_t(m) * ldc, 1);
  }
}

void gemm_blas(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
               int ldc, bool accumulate, bool transposed_b = false) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda,
              B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
}

// ---- libxsmm kernels ----------------------------------------------------------------------------
// libxsmm is column-major. Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T = B^T A^T, so per
// panel the kernel computes C^T[width, M] = Bpanel^T[width, K] * A^T[K, M] with m = width, n = M,
// k = K, where A^T and C^T are the caller's buffers reinterpreted with their row strides as
// leading dimensions.

// ldb: a plain B's row stride (the packed kernels' B is a panel: 0).
struct XsmmKey {
  int M, N, K, lda, ldc;
  bool accumulate;
  int ldb = 0;
  bool prefetch = false;  // packed panels: the kernels prefetch the next call's panel (run_xsmm_rows)
  bool operator==(const XsmmKey&) const = default;
};

struct XsmmKeyHash {
  size_t operator()(const XsmmKey& k) const {
    size_t h = 0;
    for (int v : {k.M, k.N, k.K, k.lda, k.ldc, int(k.accumulate), k.ldb, int(k.prefetch)}) {
      h = h * 0x9E3779B97F4A7C15ull + std::hash<int>{}(v);
    }
    return h;
  }
};

// The kernels for the full-width panels and for a narrower last panel (null when there is none).
struct XsmmKernels {
  libxsmm_smmfunction full = nullptr;
  libxsmm_smmfunction last = nullptr;
  bool ok = false;  // false when libxsmm could not JIT a kernel (e.g. LIBXSMM_TARGET=generic)
};

// The kernel for `width` columns of C whose B^T has leading dimension ld_b (a panel's width, or a
// plain B's row stride). With `prefetch` (LIBXSMM_GEMM_PREFETCH_AL2) the kernel, as it reads its
// panel, prefetches the same places of its fourth argument (the panel data of the next call) into
// L2; without, it ignores the arguments after the third.
libxsmm_smmfunction dispatch_xsmm(int width, int ld_b, const XsmmKey& key,
                                  int prefetch = LIBXSMM_GEMM_PREFETCH_NONE) {
  const libxsmm_blasint m = width, n = key.M, k = key.K;
  const libxsmm_blasint lda = ld_b, ldb = key.lda, ldc = key.ldc;
  const float alpha = 1.0f;
  const float beta = key.accumulate ? 1.0f : 0.0f;
  // BETA_0 lets the kernel write C without reading it, so garbage (even NaN) in C is harmless.
  const int flags = key.accumulate ? LIBXSMM_GEMM_FLAG_NONE : LIBXSMM_GEMM_FLAG_BETA_0;
  return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
}

// libxsmm_smmdispatch builds and hashes a GEMM descriptor for its registry on every call (33 ns
// here, for each of the two kernels); this per-thread map in front of it costs one small hash and
// needs no lock since each thread has its own.
const XsmmKernels& xsmm_kernels(const XsmmKey& key) {
  thread_local std::unordered_map<XsmmKey, XsmmKernels, XsmmKeyHash> cache;
  auto [it, inserted] = cache.try_emplace(key);
  if (inserted) {
    XsmmKernels& kernels = it->second;
    const int full_panels = key.N / kPanelWidth;
    const int last_width = key.N % kPanelWidth;
    const int prefetch = key.prefetch ? LIBXSMM_GEMM_PREFETCH_AL2 : LIBXSMM_GEMM_PREFETCH_NONE;
    if (full_panels > 0) kernels.full = dispatch_xsmm(kPanelWidth, kPanelWidth, key, prefetch);
    if (last_width > 0) kernels.last = dispatch_xsmm(last_width, last_width, key, prefetch);
    kernels.ok = (full_panels == 0 || kernels.full) && (last_width == 0 || kernels.last);
  }
  return it->second;
}

// Row-block height of the Xsmm path. A GEMM with M > kXsmmRowBlock runs the M = kXsmmRowBlock
// kernel over full row blocks and the M % kXsmmRowBlock kernel over the rest, so a thread JITs at
// most kXsmmRowBlock kernel pairs per (N, K, lda, ldc, accumulate) however many distinct batch
// sizes the runtime produces (each JIT costs ~70 us), instead of one per distinct M. Panels stay
// the outer loop: each K x 128 panel is read once per call while the row blocks stream past it.
// Measured against one kernel over all M (interleaved, thread CPU time, median of 31): blocks of
// 32..128 rows are all within the +-5% noise of the unblocked kernel at M = 100..2000, K,N =
// 512,1280 and 256,768, with 64 a little ahead (+1..8%) more often than not; M-block-outer order
// (every panel per row block) is 0-8% behind since all of W then streams from L3 per block.
constexpr int kXsmmRowBlock = 64;

// Rows k0.. of panel p (the kernels' operand for columns k0.. of A).
const float* panel_rows(const CpuPackedWeights& W, int p, int k0) {
  return W.panel(p) + size_t(k0) * W.panel_width(p);
}

// The panel after p, what the calls after p's last read (the last panel: itself, already there).
const float* next_panel(const CpuPackedWeights& W, int p) {
  return W.panel(std::min(p + 1, W.num_panels() - 1));
}

// Runs the kernel for panel p on the rows of A and C the kernels were dispatched for, from row k0
// of the panel (column k0 of A) on; kernels dispatched with prefetch (prefetch_panels below) stream
// `next` (the panel rows the next call reads) into L2 meanwhile. The panels of a weight larger than
// L2 come from L3 or memory at each product; streamed during the previous call, a panel is there
// when its call starts. Measured on the AMD Zen 4 (1 MiB L2; flushing 64 MiB between calls, median
// of 21, without -> with): K,N = 1024,2560 (the
// H 512 Tree-LSTM's U) 37-41 -> 75-77 GFLOP/s at M = 8, 57-60 -> 79-81 at M = 16, 86-95 -> 93-95 at
// M = 64; 2560,1024 (its dX, long panels) 32-36 -> 67 at M = 8, 43-55 -> 100 at M = 16, 69-72 ->
// 101 at M = 32; 512,1280: 38-41 -> 60-73 at M = 8, 81-94 -> 102-104 at M = 64; with warm caches
// and at M >= 256 within noise. BERxiT base (340 MiB of weights) one instance at a time: 17-18 ->
// 24-26 instances/s; the Tree-LSTM's training epochs: within the host's drift (its weights stay in
// L3 between products). A weight that fits L2 is read warm, and there the prefetches only cost
// load slots: warm, 256 x 256 and 256 x 768 at M = 1: 55, 50 -> 48, 41-44 GFLOP/s, M = 2: 104-108,
// 96 -> 93, 78-85 (DRNN H 256's reference engine lost 10%), so such weights get kernels without.
void run_xsmm_rows(const XsmmKernels& kernels, const float* A, const CpuPackedWeights& W, float* C,
                   int p, int k0, const float* next) {
  const libxsmm_smmfunction kernel = W.panel_width(p) == kPanelWidth ? kernels.full : kernels.last;
  float* c = C + size_t(p) * kPanelWidth;
  kernel(panel_rows(W, p, k0), A + k0, c, next, A + k0, c);
}

// Long panels. A K x 128 panel over a quarter of the core's L2 (K > 512 with 1 MiB, K > 1024 with
// 2 MiB, read at run time) no longer stays there, beside the next panel its kernels prefetch and
// the row blocks streaming past it, so it runs in chunks of kXsmmChunkK
// of its rows, each chunk over all the row blocks, the later chunks accumulating onto C. Measured
// on the AMD Zen 4 (1 MiB L2; panels packed from the transpose as for dX = dY W^T, 16 MiB written
// between calls to flush the caches, median of 15; whole panels -> chunks, two runs alternating, on
// a noisy host): K,N = 2560,1024 (the H 512 Tree-LSTM's dX): 84, 54 -> 91, 75 GFLOP/s at M = 64,
// 96, 74 -> 96, 99 at M = 256; 3072,768: 86, 76 -> 94, 98 at M = 256 (74, 60 -> 70, 79 at M =
// 64); 2048,512: 74, 86 -> 87, 96 at M = 256; 4096,1024: 73, 95 -> 89, 98 at M = 256, 54, 58 -> 64,
// 66 at M = 32. Chunks of 512, 640 and 1280 rows were within noise of each other at K = 2560.
constexpr int kXsmmChunkK = 512;

// The core's L2 in bytes (read at run time; 1 MiB when the system does not say).
long l2_bytes() {
  static const long bytes = [] {
    const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? l2 : long{1} << 20;
  }();
  return bytes;
}

// (Half of L2 was the bound until measured on an Intel Xeon with 2 MiB of L2 and AVX-512, decode
// steps of gpt.acr: K,N = 2048,512, the feed-forward's second matrix, one 1 MiB panel beside the
// next one prefetched, with cold weights (24 matrices, 75 MiB, between two uses), GFLOP/s half ->
// quarter: 54 -> 95 at M = 16, 66 -> 127 at M = 42, 67 -> 141 at M = 64, 71 -> 132 at M = 256, 70
// -> 142 at M = 1024. On a 1 MiB L2 this also chunks K in (512, 1024], not measured there.)
int xsmm_panel_max_k() {
  static const int k = std::max(kXsmmChunkK, int(l2_bytes() / 4 / long(kPanelWidth * sizeof(float))));
  return k;
}

// Whether the kernels of a product of M rows on W's panels prefetch the next call's panel
// (run_xsmm_rows): when W is larger than L2 and M is under two row blocks. With more rows a panel's
// reads are spread over its row blocks, and each row block's kernel prefetched the whole next panel
// again.
// Measured on an Intel Xeon with 2 MiB of L2 and AVX-512 (a product's GFLOP/s, median of 21, with
// and without the prefetches, 64 MiB written between calls): K,N = 512,2048 at M = 256 / 585 /
// 2048: 138 / 135 / 134 -> 146 / 155 / 153; 2048,512: 134 / 137 / 134 -> 144 / 148 / 149;
// 1024,2560: 133 / 138 / 142 -> 144 / 152 / 156; at M = 128 within noise (127-130 -> 126-134); at
// M = 16 the prefetches won (64-76 -> 53-66). Warm, every M ran 3-14% faster without them.
bool prefetch_panels(const CpuPackedWeights& W, int M) {
  return M < 2 * kXsmmRowBlock && size_t(W.K()) * size_t(W.N()) * sizeof(float) > size_t(l2_bytes());
}

void gemm_xsmm_unblocked(int M, const float* A, int lda, const CpuPackedWeights& W, float* C,
                         int ldc, bool accumulate) {
  const XsmmKernels& kernels = xsmm_kernels({M, W.N(), W.K(), lda, ldc, accumulate, 0, prefetch_panels(W, M)});
  if (!kernels.ok) {
    gemm_blas(M, W.N(), W.K(), A, lda, W.rows().data, W.rows().ld, C, ldc, accumulate, W.rows().transposed);
    return;
  }
  for (int p = 0; p < W.num_panels(); ++p)
    run_xsmm_rows(kernels, A, W, C, p, 0, next_panel(W, p));
}

// The Xsmm path: per panel, the row blocks (kXsmmRowBlock above) run past it; a long panel (above)
// runs chunk after chunk of its rows, each over every row block, the later chunks accumulating.
// Panels [p0, p1) only (p1 < 0: to the last): each panel's columns get the same bits either way.
void gemm_xsmm(int M, const float* A, int lda, const CpuPackedWeights& W, float* C, int ldc,
               bool accumulate, int p0 = 0, int p1 = -1) {
  if (W.N() <= kDotMaxN) return gemm_dot(M, W.N(), W.K(), A, lda, W.transposed(), W.transposed_ld(), C, ldc, accumulate);
  const int N = W.N();
  const int K = W.K();
  const int chunk = K > xsmm_panel_max_k() ? kXsmmChunkK : K;
  const int full_blocks = M / kXsmmRowBlock;
  const int rest = M % kXsmmRowBlock;
  // [chunk kind][block kind]: the first chunk (the caller's accumulate), a later whole chunk and
  // a later last partial chunk (both accumulating); whole row blocks and the remainder.
  const XsmmKernels* kernels[3][2] = {};
  const bool used[3] = {true, K >= 2 * chunk, K > chunk && K % chunk != 0};
  const bool prefetch = prefetch_panels(W, M);
  bool ok = true;
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 2; ++r) {
      const int rows = r == 0 ? (full_blocks > 0 ? kXsmmRowBlock : 0) : rest;
      if (!used[c] || rows == 0) continue;
      kernels[c][r] = &xsmm_kernels(
          {rows, N, c < 2 ? chunk : K % chunk, lda, ldc, c == 0 ? accumulate : true, 0, prefetch});
      ok = ok && kernels[c][r]->ok;
    }
  if (!ok) {  // sgemm over the panels' columns (their bits may then depend on the cut)
    const int c0 = p0 * kPanelWidth, c1 = p1 < 0 ? N : std::min(N, p1 * kPanelWidth);
    const auto& b = W.rows();
    if (c1 > c0)
      gemm_blas(M, c1 - c0, K, A, lda, b.data + (b.transposed ? size_t(c0) * b.ld : c0), b.ld, C + c0, ldc,
                accumulate, b.transposed);
    return;
  }
  for (int p = p0; p < (p1 < 0 ? W.num_panels() : p1); ++p)
    for (int k0 = 0; k0 < K; k0 += chunk) {
      const int c = k0 == 0 ? 0 : (K - k0 >= chunk ? 1 : 2);
      // What the calls after this chunk read: the panel's next chunk, else the next panel.
      const float* next = k0 + chunk < K ? panel_rows(W, p, k0 + chunk) : next_panel(W, p);
      for (int b = 0; b < full_blocks; ++b) {
        const size_t m0 = size_t(b) * kXsmmRowBlock;
        run_xsmm_rows(*kernels[c][0], A + m0 * lda, W, C + m0 * ldc, p, k0, next);
      }
      if (rest > 0) {
        const size_t m0 = size_t(full_blocks) * kXsmmRowBlock;
        run_xsmm_rows(*kernels[c][1], A + m0 * lda, W, C + m0 * ldc, p, k0, next);
      }
    }
}

// ---- libxsmm kernels on a plain (unpacked) B ---------------------------------------------------
// Both operands belong to one instance (attention scores q k^T, MV-RNN's phrase matrices): B is
// read once, so packing it would cost more than it saves. One JIT kernel computes the whole product
// reading B in place (C^T[N, M] = B^T[N, K] A^T[K, M] column-major, as above, with B's row stride
// as its leading dimension).

// Null when libxsmm cannot JIT the kernel. Cached per thread like xsmm_kernels.
libxsmm_smmfunction plain_xsmm_kernel(const XsmmKey& key) {
  thread_local std::unordered_map<XsmmKey, libxsmm_smmfunction, XsmmKeyHash> cache;
  auto [it, inserted] = cache.try_emplace(key, nullptr);
  if (inserted) it->second = dispatch_xsmm(key.N, key.ldb, key);
  return it->second;
}

void gemm_plain_xsmm(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float* C, int ldc, bool accumulate) {
  libxsmm_smmfunction kernel = plain_xsmm_kernel({M, N, K, lda, ldc, accumulate, ldb});
  if (!kernel) return gemm_blas(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  kernel(B, A, C);
}

// ---- C = A^T B over many rows (a weight's gradient X^T dY) on the JIT kernels -----------------
// K (a batch's rows) runs in chunks of kAtChunkK: a chunk of A transposed into a buffer of the
// thread, then one JIT kernel per kXsmmRowBlock rows of C reading B's chunk in place. gemm_bench's
// weight-gradient table (M = N = 512, K = 1024 / 4096 / 16384, AMD Zen 5): 192 / 182 / 186 GFLOP/s
// against 100 / 98 / 103 for sgemm on OpenBLAS's core forced to Haswell; even with sgemm on its own
// AVX-512 core (168 / 163 / 160 against 170 / 163 / 150), which then keeps it (blas_narrower_than_jit).
constexpr int kAtChunkK = 128;
constexpr int kAtMaxN = 512;  // wider C is cut into column blocks of this many (the kernels' m)

}  // namespace

bool gemm_at_jit(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                 bool accumulate) {
  if (trivial_gemm(M, N, K, C, ldc, accumulate)) return true;
  thread_local std::vector<float> at;
  at.resize(size_t(M) * kAtChunkK);
  // Every kernel first: a failure leaves C untouched for the caller's fallback.
  auto kernel = [&](int rows, int cols, int chunk, bool acc) {
    return plain_xsmm_kernel({rows, cols, chunk, chunk, ldc, acc, ldb});
  };
  for (int n0 = 0; n0 < N; n0 += kAtMaxN)
    for (int rows : {std::min(M, kXsmmRowBlock), M % kXsmmRowBlock})
      for (int chunk : {std::min(K, kAtChunkK), K % kAtChunkK})
        for (bool acc : {accumulate, true})
          if (rows > 0 && chunk > 0 && !kernel(rows, std::min(kAtMaxN, N - n0), chunk, acc)) return false;
  for (int k0 = 0; k0 < K; k0 += kAtChunkK) {
    const int chunk = std::min(kAtChunkK, K - k0);
    transpose_2d(A + size_t(k0) * lda, lda, at.data(), chunk, chunk, M);
    const bool acc = k0 > 0 || accumulate;
    for (int n0 = 0; n0 < N; n0 += kAtMaxN) {
      const int cols = std::min(kAtMaxN, N - n0);
      for (int m0 = 0; m0 < M; m0 += kXsmmRowBlock) {
        const int rows = std::min(kXsmmRowBlock, M - m0);
        kernel(rows, cols, chunk, acc)(B + size_t(k0) * ldb + n0, at.data() + size_t(m0) * chunk,
                                       C + size_t(m0) * ldc + n0);
      }
    }
  }
  return true;
}

namespace {
// K in chunks of kAtPackedChunk rows (the JIT kernels' K): a chunk of A transposed into a buffer of
// the thread and the chunk of B packed into panels, then the packed product (gemm_xsmm) of its
// rows onto C. One block of a weight's gradient (M, N <= 512) over a batch's rows, one thread,
// median of 11, on an Intel Xeon with 2 MiB of L2 and AVX-512 where OpenBLAS runs its SkylakeX
// core (sgemm -> here, GFLOP/s): M,N = 512,512 over 8192 rows of X and dY of 512 and 2048 columns:
// 124 -> 129 (dY 2048 wide), 119 -> 132 (X 2048 wide), 127 -> 134 (dY 1536 wide); over 1024 rows
// 135 -> 142; M,N = 256,512 over 4096 rows 125 -> 132; over 256 rows even or behind (145 -> 143,
// 148 -> 138), so sgemm keeps those (kAtPackedMinK). Chunks of 128 and 384 rows were within noise
// of 256.
constexpr int kAtPackedChunk = 256;
constexpr int kAtPackedMinK = 1024;

// B's chunk of `rows` rows as panels, read by nothing after the call: one object per thread and
// shape, packed again for each chunk; the thread keeps the latest shapes' up to kAtPanelsKept
// floats (a weight's gradient by blocks has two or three shapes).
constexpr size_t kAtPanelsKept = size_t{1} << 22;

CpuPackedWeights& chunk_panels(int rows, int N, const float* B, int ldb) {
  thread_local std::vector<std::unique_ptr<CpuPackedWeights>> cache;
  for (auto& w : cache)
    if (w->K() == rows && w->N() == N) {
      w->repack(B, ldb);
      return *w;
    }
  size_t held = size_t(rows) * N;
  for (const auto& w : cache) held += size_t(w->K()) * w->N();
  while (!cache.empty() && held > kAtPanelsKept) {
    held -= size_t(cache.front()->K()) * cache.front()->N();
    cache.erase(cache.begin());
  }
  cache.push_back(std::make_unique<CpuPackedWeights>(rows, N, B, ldb, false, true));
  return *cache.back();
}
}  // namespace

void gemm_at_packed(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                    bool accumulate) {
  if (trivial_gemm(M, N, K, C, ldc, accumulate)) return;
  thread_local std::vector<float> at;
  at.resize(size_t(M) * kAtPackedChunk);
  for (int k0 = 0; k0 < K; k0 += kAtPackedChunk) {
    const int rows = std::min(kAtPackedChunk, K - k0);
    transpose_2d(A + size_t(k0) * lda, lda, at.data(), rows, rows, M);
    gemm_xsmm(M, at.data(), rows, chunk_panels(rows, N, B + size_t(k0) * ldb, ldb), C, ldc, k0 > 0 || accumulate);
  }
}

const char* gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::Gemv: return "gemv";
    case GemmPath::Xsmm: return "xsmm";
    case GemmPath::Blas: return "blas";
  }
  return "?";
}

// Thresholds measured with gemm_bench and finer sweeps of M and K on the 2-core Xeon this was
// tuned on (family 6 model 207, 2 MiB L2 per core), single-threaded, best-of-15 GFLOP/s.
//  - M == 1 is bound by reading W. Once W exceeds 1 MiB it comes from L3 in any real model, and
//    sgemv is 4-5% ahead (K,N = 512,2048: 14.2 vs 13.5 for Xsmm; 1024,4096: 12.5 vs 11.9). A
//    W of <= 1 MiB can stay in L2 across the steps of a recurrent model, where Xsmm is 10-45% ahead
//    (512,512: 52 vs 38) and loses at most 4% when W is cold after all (13.4 vs 12.9).
//  - Xsmm keeps one K x 128 panel of W in L2 while all of A streams past it. Up to K = 2048 (a
//    1 MiB panel, half of L2) it beats OpenBLAS on the same weights at every M measured: 2-3x at
//    M = 2..16, 1.3x at M = 64, 1.03-1.2x at M = 256..2048 (1024^3: 133 vs 115), since OpenBLAS
//    re-packs W on every call.
//  - For K > 2048 the panel crowds L2, and before the row blocks and panel prefetch below
//    OpenBLAS's blocking won from M = 64 on (K = 3072: 0.88x at M = 64, 0.72x at M = 256). Measured
//    again with them (dX = dY W^T on a packed W^T, alternating, median of 15): Xsmm 1.04-1.3x at
//    M = 64..256 and K = 2560..8192, warm and cold, level at M = 1024..2048; xsmm_max_k.
//  - Inside the Xsmm path (re-measured for the Tree-LSTM shapes, M = 4..2000, K,N = 256,768 /
//    512,1280 / 256,5, old and new strategies interleaved, thread CPU time, median of 31-41):
//    M > 64 runs in 64-row blocks (kXsmmRowBlock: bounds the JIT kernels per shape at 64, speed
//    within noise of one kernel per M, +0..8% at M = 100..512); N <= 8 runs the dot-product kernel
//    (N = 5: 72-77 vs 39-43 for the m = 5 libxsmm kernel at M = 4..1000, 42 vs 4 at M = 1; OpenBLAS
//    is 46-64 at M = 16..256 and 20 at M >= 1000). Small M stays bound by reading W: K,N =
//    512,1280 (2.5 MiB, over L2) at M = 4 moves ~23 GB/s from L3; software prefetch of the next
//    panel (prefetcht1 before each K-chunk) lost 20-35% there, so there is none.
//  - On an AMD Zen 4 (family 25, AVX-512, 1 MiB L2; the Tree-LSTM's training shapes, 7 runs of
//    >= 50 ms, median) Xsmm is ahead at every K measured up to 4096, even with the panel over L2:
//    K,N = 2560,1024: 108 vs 77 at M = 32, 103 vs 80 at M = 56, 100 vs 96 at M = 256;
//    3072,768: 107 vs 83 at M = 64, 98 vs 98 at M = 256; 4096,1024: 95 vs 76 at M = 64, 101 vs
//    97 at M = 256. There the large-K rule starts above 4096 (unmeasured beyond).
constexpr size_t kGemvMinWeightBytes = size_t(1) << 20;
constexpr int kXsmmMaxMForLargeK = 32;

namespace {
// The largest K of the Xsmm path for M > kXsmmMaxMForLargeK, by the CPU found at run time: 4096
// with AVX-512, measured ahead up to there on the Xeon and the Zen 4 above; 2048 elsewhere.
int xsmm_max_k() {
  static const int k = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") ? 4096 : 2048);
  return k;
}
}  // namespace

GemmPath choose_gemm_path(int M, int N, int K) {
  if (M == 1) {
    const size_t weight_bytes = size_t(K) * N * sizeof(float);
    return weight_bytes > kGemvMinWeightBytes ? GemmPath::Gemv : GemmPath::Xsmm;
  }
  if (K <= xsmm_max_k() || M <= kXsmmMaxMForLargeK) return GemmPath::Xsmm;
  return GemmPath::Blas;
}

// Plain B (gemm_via / choose_plain_gemm_path), from gemm_bench's "plain B" table (one JIT kernel
// reading B in place against cblas_sgemm, single thread, median of 11): the JIT kernel is ahead for
// every product measured up to 512^3, 1.1x at 64^3 (129 vs 115 GFLOP/s) and at 512^3 (115 vs 106),
// 1.5x at M,K,N = 128,64,128 (126 vs 85: BERT-base attention); at 1024^3 one kernel without cache
// blocking falls far behind sgemm (43 vs 102). M == 1 is a matrix-vector product: sgemv.
constexpr int64_t kPlainXsmmMaxMNK = int64_t{512} * 512 * 512;

GemmPath choose_plain_gemm_path(int M, int N, int K) {
  if (M == 1) return GemmPath::Gemv;
  return int64_t{M} * N * K <= kPlainXsmmMaxMNK ? GemmPath::Xsmm : GemmPath::Blas;
}

void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate) {
  gemm_via(choose_plain_gemm_path(M, N, K), M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

constexpr int kStridedBlasMinDim = 128;

WeightGradientPath weight_gradient_path(int N, int K, bool jit_available) {
  if (jit_available && blas_narrower_than_jit()) return WeightGradientPath::Jit;
  return K >= kAtPackedMinK && N >= kStridedBlasMinDim ? WeightGradientPath::Packed : WeightGradientPath::Blas;
}

const char* weight_gradient_path_name(WeightGradientPath path) {
  switch (path) {
    case WeightGradientPath::Jit: return "jit";
    case WeightGradientPath::Packed: return "packed";
    case WeightGradientPath::Blas: return "blas";
  }
  return "?";
}

// A transposed operand is copied into a row-major buffer of the thread first (it is the small
// one: K x N of QK^T is 64 x n against 2 n^2 64 FLOPs), so that every product takes gemm's JIT
// kernels, which beat sgemm with a transposed operand on these sizes (1.5x at M, K, N =
// 128, 64, 128; kPlainXsmmMaxMNK). alpha scales B as it is copied (B is copied for it if it is
// not transposed).
void gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                  const float* B, int ldb, float* C, int ldc, bool accumulate, float alpha) {
  // A transposed operand that is a weight-sized matrix (both of its dimensions >= kStridedBlasMinDim,
  // as W^T in a gradient through a weight) goes to sgemm with the transpose: copying it for every
  // call cost more than the JIT kernels saved (TreeLSTM H=256 backward). Thinner transposed operands
  // (a head's 64 columns in QK^T, a batch's rows in a weight's gradient) are copied, and the product
  // takes the JIT kernels, faster there (ragged encoder layer on race and wiki512: 2-5%).
  // A thin B (N <= kDotMaxN) with A transposed takes gemm_at_thin above; a weight-sized A^T by a
  // plain B (a weight's gradient X^T dY over a batch's rows) takes gemm_at_jit above when OpenBLAS
  // runs narrower vectors than the JIT, else gemm_at_packed over many rows.
  const bool thin = trans_a && !trans_b && N <= kDotMaxN && M >= kStridedBlasMinDim && N > 0 && K > 0;
  const bool big_a = trans_a && M >= kStridedBlasMinDim && K >= kStridedBlasMinDim;
  const bool big_b = trans_b && N >= kStridedBlasMinDim && K >= kStridedBlasMinDim;
  // A few rows of A take kernels/gemm_few_rows.h's loops where they measured faster.
  const bool few = !trans_a && !big_b && M > 0 && N > 0 &&
                   (trans_b ? M <= kFewRows : M == 1 && int64_t{K} * N <= kFewRowsMaxPlainB);
  if (thin || big_a || big_b || few) {
    ACROBAT_ASSERT(M >= 0 && N >= 0 && K >= 0, "negative GEMM dimension");
    ACROBAT_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
                   "GEMM leading dimension smaller than the row");
  }
  if (thin && gemm_at_thin(M, N, K, A, lda, B, ldb, C, ldc, accumulate, alpha)) return;
  if (few) {
    if (trans_b) few_rows_dot(M, N, K, A, lda, B, ldb, C, ldc, accumulate, alpha);
    else few_rows_axpy(M, N, K, A, lda, B, ldb, C, ldc, accumulate, alpha);
    return;
  }
  if (big_a && !trans_b && alpha == 1.0f) {
    WeightGradientPath path = weight_gradient_path(N, K);
    if (path == WeightGradientPath::Jit) {
      if (gemm_at_jit(M, N, K, A, lda, B, ldb, C, ldc, accumulate)) return;
      path = weight_gradient_path(N, K, false);
    }
    if (path == WeightGradientPath::Packed) {
      gemm_at_packed(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
      return;
    }
  }
  if (big_a || big_b) {
    ensure_backend_ready();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc);
    return;
  }
  thread_local std::vector<float> a_copy, b_copy;
  if (trans_a) {  // A is stored [K, M]
    a_copy.resize(static_cast<size_t>(M) * K);
    transpose_2d(A, lda, a_copy.data(), K, K, M);
    A = a_copy.data();
    lda = K;
  }
  if (trans_b) {  // B is stored [N, K]
    b_copy.resize(static_cast<size_t>(K) * N);
    transpose_2d(B, ldb, b_copy.data(), N, N, K);
    if (alpha != 1.0f) for (float& x : b_copy) x *= alpha;
    B = b_copy.data();
    ldb = N;
  } else if (alpha != 1.0f) {
    b_copy.resize(static_cast<size_t>(K) * N);
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) b_copy[static_cast<size_t>(k) * N + n] = alpha * B[static_cast<size_t>(k) * ldb + n];
    B = b_copy.data();
    ldb = N;
  }
  gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void gemm_via(GemmPath path, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
              float* C, int ldc, bool accumulate) {
  check_gemm_args(M, N, K, lda, ldb, ldc);
  if (trivial_gemm(M, N, K, C, ldc, accumulate)) return;
  ensure_backend_ready();
  switch (path) {
    case GemmPath::Gemv: return gemm_gemv(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    case GemmPath::Xsmm: return gemm_plain_xsmm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    case GemmPath::Blas: return gemm_blas(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  }
  ACROBAT_ASSERT(false, "unknown GemmPath");
}

// Not in kernels.h: the Xsmm path as it was before row blocking (one kernel over all M rows), kept
// so that bench/gemm_bench can print old and new side by side. Declared there.
void gemm_packed_xsmm_unblocked_for_bench(int M, const float* A, int lda, const PackedWeights& W,
                                          float* C, int ldc, bool accumulate) {
  const CpuPackedWeights& w = cpu_weights(W);
  check_gemm_args(M, w.N(), w.K(), lda, w.N(), ldc);
  if (trivial_gemm(M, w.N(), w.K(), C, ldc, accumulate)) return;
  ensure_backend_ready();
  gemm_xsmm_unblocked(M, A, lda, w, C, ldc, accumulate);
}

std::shared_ptr<PackedWeights> pack_weights(int K, int N, const float* B, int ldb) {
  ACROBAT_ASSERT(K >= 0 && N >= 0 && ldb >= N, "bad weight matrix shape");
  return std::make_shared<CpuPackedWeights>(K, N, B, ldb, false, false);
}

std::shared_ptr<PackedWeights> pack_weights_in_place(int K, int N, const float* B, int ldb) {
  ACROBAT_ASSERT(K >= 0 && N >= 0 && ldb >= N, "bad weight matrix shape");
  return std::make_shared<CpuPackedWeights>(K, N, B, ldb, false, true);
}

std::shared_ptr<PackedWeights> pack_transposed_weights(int K, int N, const float* W, int ldw) {
  ACROBAT_ASSERT(K >= 0 && N >= 0 && ldw >= K, "bad weight matrix shape");
  return std::make_shared<CpuPackedWeights>(K, N, W, ldw, true, true);
}

void gemm_packed(int M, const float* A, int lda, const PackedWeights& W, float* C, int ldc,
                 bool accumulate) {
  gemm_packed_via(choose_gemm_path(M, W.N(), W.K()), M, A, lda, W, C, ldc, accumulate);
}

int packed_panels(int M, const PackedWeights& W) {
  const CpuPackedWeights& w = cpu_weights(W);
  const bool panels = M > 0 && w.K() > 0 && w.N() > kDotMaxN && choose_gemm_path(M, w.N(), w.K()) == GemmPath::Xsmm;
  return panels ? w.num_panels() : 0;
}

void gemm_packed_panels(int M, const float* A, int lda, const PackedWeights& W, float* C, int ldc,
                        bool accumulate, int p0, int p1) {
  const CpuPackedWeights& w = cpu_weights(W);
  check_gemm_args(M, w.N(), w.K(), lda, w.N(), ldc);
  ACROBAT_ASSERT(packed_panels(M, W) > 0 && 0 <= p0 && p0 <= p1 && p1 <= w.num_panels(), "bad panel range");
  ensure_backend_ready();
  gemm_xsmm(M, A, lda, w, C, ldc, accumulate, p0, p1);
}

void gemm_packed_via(GemmPath path, int M, const float* A, int lda, const PackedWeights& W,
                     float* C, int ldc, bool accumulate) {
  const CpuPackedWeights& w = cpu_weights(W);
  const int N = w.N();
  const int K = w.K();
  check_gemm_args(M, N, K, lda, N, ldc);
  if (trivial_gemm(M, N, K, C, ldc, accumulate)) return;
  ensure_backend_ready();
  switch (path) {
    case GemmPath::Gemv: return gemm_gemv(M, N, K, A, lda, w.rows().data, w.rows().ld, C, ldc, accumulate, w.rows().transposed);
    case GemmPath::Xsmm: return gemm_xsmm(M, A, lda, w, C, ldc, accumulate);
    case GemmPath::Blas: return gemm_blas(M, N, K, A, lda, w.rows().data, w.rows().ld, C, ldc, accumulate, w.rows().transposed);
  }
  ACROBAT_ASSERT(false, "unknown GemmPath");
}

}  // namespace acrobat::kernels
