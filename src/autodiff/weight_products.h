// Reverse mode's products X W of stacked rows by a param's matrix W (reverse_mode.cpp, step 3):
// dX = dY W^T on W^T packed once per call, dW deferred to one GEMM over every batch's rows.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "acrobat/kernels.h"
#include "runtime/thread_pool.h"
#include "runtime/value.h"
#include "support/function_ref.h"

namespace acrobat {

// Kept from call to call: the rows' memory and the packed W^T.
class WeightProducts {
 public:
  // A new call: no rows kept yet, and the params may have changed in place since the last one.
  void begin();
  // dx[rows, K] = dy[rows, N] W^T for W[K, N] at `w` (written, not added to); `pool` shares its
  // blocks of rows and of dx's columns, cut the same way whatever the threads.
  void input_adjoint(const float* w, int K, int N, const float* dy, float* dx, int64_t rows, ThreadPool* pool);
  // Keeps x[rows, K] and dy[rows, N] of a product by W (param `param` at `offset`) for dW.
  void keep_rows(int param, int64_t offset, int K, int N, const float* x, const float* dy, int64_t rows);
  // grads[param] at W += X^T dY for x[rows, K] and dy[rows, N] now, cut as weight_gradients cuts
  // (for rows enough to make one GEMM pay: a ragged batch's).
  void weight_gradient(std::vector<Tensor>& grads, int param, int64_t offset, int K, int N, const float* x,
                       const float* dy, int64_t rows, ThreadPool* pool) const;
  // The memory of the kept rows and the packed W^T.
  size_t bytes() const;
  // grads[param] at W += X^T dY over every row kept this call; mark(param, offset, n) for each W.
  void weight_gradients(std::vector<Tensor>& grads, ThreadPool* pool,
                        FunctionRef<void(int, int64_t, int64_t)> mark) const;

 private:
  // dX = dY W^T is cut by dX's columns as well as its rows, one group per panel of the JIT kernels:
  // a tree's batch has 20-90 rows, one row block, which one thread ran alone while the others
  // waited. Each group is W^T's panel packed on its own; the cut does not depend on the threads, so
  // neither do the bits (on the JIT path a group also computes what the whole product computed
  // there; at M == 1 a group may take the JIT path where the whole took sgemv). Tree-LSTM training
  // at batch 64 on two threads (AMD EPYC Zen 5, epochs 2 and 3 of 3, alternating runs), whole ->
  // groups of 128: H 256 1832-1911 -> 1983-2090 trees/s, H 512 607-635 -> 619-665; one thread
  // within noise (groups of 256: between).
  static constexpr int kDxColumns = 128;
  // W[K, N] transposed and packed, once per call, by groups of kDxColumns of W^T's columns (W's
  // rows): dX's columns [g * kDxColumns, ...) come from group g.
  const std::vector<std::shared_ptr<kernels::PackedWeights>>& transposed(const float* w, int K, int N);

  // The rows of X and dL/d(XW) of the products by one matrix W[K, N], in schedule order.
  struct WeightRows {
    int param;
    int64_t offset;  // of W in the param
    int K, N;
    std::vector<float> x, dy;  // rows x K, rows x N (capacity kept from call to call)
    int64_t rows = 0;
  };
  std::vector<WeightRows> weight_rows_;
  // W^T packed for dX = dY W^T, by W's address; `call` is the call that last packed it (the params
  // change between calls, in place; its row-major paths read W itself).
  struct TransposedWeight {
    std::vector<std::shared_ptr<kernels::PackedWeights>> groups;
    int K = 0, N = 0;  // of W
    uint64_t call = 0;
  };
  std::unordered_map<const float*, TransposedWeight> transposed_;
  uint64_t calls_ = 0;
};

}  // namespace acrobat
