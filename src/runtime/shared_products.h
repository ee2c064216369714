// Products by packed weights that a pool's threads share while one thread runs a batch alone.
//
// A batch kept for reverse mode runs in the pieces one thread would cut (batch_runner.cpp), so that
// a gradient has the same bits on any number of threads; with more threads the others would wait
// through it. Its products by weights are cut instead by W's column panels, which the threads take
// as they come: a column's bits do not depend on which thread computed it
// (kernels::gemm_packed_panels), so the cut changes no bit.
#pragma once

#include "acrobat/kernels.h"
#include "runtime/thread_pool.h"

namespace acrobat {

// While one lives on a thread, gemm_packed_shared calls made on that thread share `pool` (null:
// none). Scopes nest: the innermost holds.
class ShareProducts {
 public:
  explicit ShareProducts(ThreadPool* pool);
  ~ShareProducts();
  ShareProducts(const ShareProducts&) = delete;
  ShareProducts& operator=(const ShareProducts&) = delete;

 private:
  ThreadPool* outer_;
};

// kernels::gemm_packed, its column panels shared by the threads of the thread's ShareProducts
// scope when the product is large enough to pay for waking them (then returns true).
bool gemm_packed_shared(int M, const float* A, int lda, const kernels::PackedWeights& W, float* C, int ldc,
                        bool accumulate);

}  // namespace acrobat
