#include "runtime/shared_products.h"

#include <algorithm>
#include <cstdint>

namespace acrobat {

namespace {

thread_local ThreadPool* shared_pool = nullptr;

// A product below this many FLOPs runs on the calling thread: waking another costs about as much.
constexpr double kMinSharedFlops = 4e6;
// Pieces per thread: a thread that starts late (woken from sleep) or runs slower takes fewer.
// Tree-LSTM training at H 512, batch 8, two threads (products of 12 and 20 panels), epochs 2-3 of
// alternating runs on an Intel Xeon: 1, 2 and 4 pieces a thread 15.6-16.1, 15.2-16.1 and 15.7-16.8 s.
constexpr int kPiecesPerThread = 2;

}  // namespace

ShareProducts::ShareProducts(ThreadPool* pool) : outer_(shared_pool) { shared_pool = pool; }

ShareProducts::~ShareProducts() { shared_pool = outer_; }

bool gemm_packed_shared(int M, const float* A, int lda, const kernels::PackedWeights& W, float* C, int ldc,
                        bool accumulate) {
  ThreadPool* pool = shared_pool;
  const int panels = pool && pool->size() > 1 ? kernels::packed_panels(M, W) : 0;
  if (panels < 2 || 2.0 * M * double(W.N()) * W.K() < kMinSharedFlops) {
    kernels::gemm_packed(M, A, lda, W, C, ldc, accumulate);
    return false;
  }
  // Contiguous runs of panels, so that a thread's kernels prefetch the panel it takes next.
  const int64_t pieces = std::min<int64_t>(panels, int64_t{kPiecesPerThread} * pool->size());
  pool->run(pieces, [&](int64_t i, int) {
    const int p0 = static_cast<int>(i * panels / pieces), p1 = static_cast<int>((i + 1) * panels / pieces);
    kernels::gemm_packed_panels(M, A, lda, W, C, ldc, accumulate, p0, p1);
  });
  return true;
}

}  // namespace acrobat
