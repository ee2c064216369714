// Reverse mode's products X W of stacked rows by a param's matrix W (reverse_mode.cpp, step 3):
// dX = dY W^T on W^T packed once per call, dW = X^T dY over every batch's rows, kept in chunks of
// rows that the pool's idle workers multiply while the backward goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "acrobat/kernels.h"
#include "runtime/thread_pool.h"
#include "runtime/value.h"

namespace acrobat {

// Kept from call to call: the rows' memory and the packed W^T.
//
// dW = X^T dY is added to the gradient over the kept rows in chunks of kChunkRows rows, in chunk
// order, by blocks of W. Workers of the pool that no call needs add the chunks already filled
// while the caller goes on (ThreadPool::Background); the caller adds the rest at the end. Who adds
// a chunk changes no bit: the chunks, the blocks and the order of the sums are the same whatever
// the threads. A write by another path into a W with kept rows (flush) first adds all of them.
class WeightProducts : private ThreadPool::Background {
 public:
  WeightProducts() = default;
  WeightProducts(const WeightProducts&) = delete;
  WeightProducts& operator=(const WeightProducts&) = delete;
  ~WeightProducts() { stop(); }

  // A new call into `grads`: no rows kept yet, and the params may have changed in place since the
  // last one. With a pool, its idle workers add the filled chunks until weight_gradients or stop.
  void begin(std::vector<Tensor>& grads, ThreadPool* pool);
  // The workers stop adding chunks (returns when none does); weight_gradients still adds them all.
  // Called by weight_gradients, and by whoever abandons a call (an exception).
  void stop();
  // dx[rows, K] = dy[rows, N] W^T for W[K, N] at `w` (written, not added to); `pool` shares its
  // blocks of rows and of dx's columns, cut the same way whatever the threads.
  void input_adjoint(const float* w, int K, int N, const float* dy, float* dx, int64_t rows, ThreadPool* pool);
  // Keeps x[rows, K] and dy[rows, N] of a product by W (param `param` at `offset`) for dW.
  void keep_rows(int param, int64_t offset, int K, int N, const float* x, const float* dy, int64_t rows);
  // input_adjoint and keep_rows in one call of the pool: the rows are copied by pieces of their own
  // beside the products' (memory-bound copies beside compute-bound products, instead of after them
  // on the calling thread).
  void input_adjoint_keeping(int param, int64_t offset, const float* w, int K, int N, const float* x,
                             const float* dy, float* dx, int64_t rows, ThreadPool* pool);
  // Before another path adds to grads[param][offset, offset + n): the rows kept for a W there are
  // added to the gradient first, so that the order of the sums is the program's, not the threads'.
  void flush(int param, int64_t offset, int64_t n, ThreadPool* pool) {
    if (size_t(param) < kept_.size() && kept_[size_t(param)]) flush_overlapping(param, offset, n, pool);
  }
  // grads[param] at W += X^T dY for x[rows, K] and dy[rows, N] now, cut as weight_gradients cuts
  // (for rows enough to make one GEMM pay: a ragged batch's).
  void weight_gradient(std::vector<Tensor>& grads, int param, int64_t offset, int K, int N, const float* x,
                       const float* dy, int64_t rows, ThreadPool* pool) const;
  // The memory of the kept rows and the packed W^T.
  size_t bytes() const;
  // grads at each W += X^T dY over the rows kept this call and not yet added.
  void weight_gradients(ThreadPool* pool);

  // Rows of a chunk of kept rows: a multiple of the 128 rows by which kernels::gemm_at_jit runs
  // X^T dY (on that path the chunks add what one product over all the rows would, bit for bit),
  // and a worker's unit (one chunk by one block of W: 2 * 256 * 512 * 512 FLOPs, about a
  // millisecond) short enough not to keep it long from the next call. Chunks of 128 rows measured
  // no faster on two threads, of 512 about 3% slower (Tree-LSTM training, docs/benchmarks.md).
  static constexpr int64_t kChunkRows = 256;

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
  // W^T packed for dX = dY W^T, by W's address; `call` is the call that last packed it (the params
  // change between calls, in place; its row-major paths read W itself).
  struct TransposedWeight {
    std::vector<std::shared_ptr<kernels::PackedWeights>> groups;
    int K = 0, N = 0;  // of W
    uint64_t call = 0;
  };
  // W[K, N] transposed and packed by groups of kDxColumns of W^T's columns (W's rows): dX's
  // columns [g * kDxColumns, ...) come from group g. Packed when new; else its `call` says whether
  // this call has packed it yet (input_adjoint packs the groups in its pieces).
  TransposedWeight& transposed(const float* w, int K, int N);

  // The rows of X and dL/d(XW) of the products by one matrix W[K, N], in schedule order, in
  // chunks of kChunkRows rows; the chunks' memory is kept from call to call.
  struct WeightRows {
    int param;
    int64_t offset;  // of W in the param
    int K, N;
    std::vector<std::unique_ptr<float[]>> x, dy;  // chunk c: kChunkRows x K, kChunkRows x N
    int64_t rows = 0;
    // Guarded by mutex_: the chunks the workers may add and the rows those hold (full chunks only,
    // but at the end of the call).
    int64_t ready = 0, ready_rows = 0;
  };
  // A block of W[K, N]: rows [r0, r1), columns [c0, c1).
  struct Block {
    int r0, r1, c0, c1;
  };
  // The sums of one block of one W: `done` chunks added so far.
  struct Stream {
    size_t rows;  // index into weight_rows_
    Block b;
    int64_t done = 0;
    bool busy = false;  // a thread adds a chunk of it
  };
  // Up to kCopyRows rows of x and dy of a product to their places in a chunk (a piece of the pool:
  // a batch of 64 to 256 rows gives the threads several).
  struct RowCopy {
    const float *x, *dy;
    float *to_x, *to_dy;
    int64_t n;
    int K, N;
  };
  static constexpr int64_t kCopyRows = 64;
  // The places of the next `rows` kept rows of the products by W (chunks added as needed), as the
  // copies that fill them (into copies_), counted in W's rows; rows_placed once they are copied.
  WeightRows& place_rows(int param, int64_t offset, int K, int N, const float* x, const float* dy, int64_t rows);
  // The chunks the copies filled are ready for the workers.
  void rows_placed(WeightRows& r);
  static void copy_rows(const RowCopy& c);
  // dx = dy W^T, and `copies` run by pieces of the same call.
  void input_adjoint_copying(const float* w, int K, int N, const float* dy, float* dx, int64_t rows,
                             ThreadPool* pool, std::span<const RowCopy> copies);
  // W's blocks, the same whatever the threads.
  static std::vector<Block> blocks(int K, int N);
  // Block b of dw += X^T dY for X [rows, K] and dY [rows, N] (dw's row stride N).
  static void gradient_block(const float* x, const float* dy, int64_t rows, int K, int N, const Block& b,
                             float* dw);
  // Adds s's chunks from s.done on to the gradient, the last one as far as the rows go.
  void add_chunks(Stream& s);
  // Adds, now, the rows kept for each W of param `param` that overlaps [offset, offset + n).
  void flush_overlapping(int param, int64_t offset, int64_t n, ThreadPool* pool);
  // ThreadPool::Background: adds one chunk that is full and not yet added to its block.
  bool step(int thread) noexcept override;

  std::vector<Tensor>* grads_ = nullptr;  // this call's
  // Guards weight_rows_'s and streams_'s structure (new entries, new chunks, `ready`) and the
  // streams' progress while workers add chunks.
  std::mutex mutex_;
  std::vector<std::unique_ptr<WeightRows>> weight_rows_;
  std::vector<Stream> streams_;
  std::vector<uint8_t> kept_;   // per param: whether a W of it has rows kept this call
  bool failed_ = false;         // a worker's sum threw: the caller adds the rest (and meets it)
  ThreadPool* pool_ = nullptr;  // attached, this call
  std::unordered_map<const float*, TransposedWeight> transposed_;
  std::vector<RowCopy> copies_;  // place_rows's, of the product being differentiated
  uint64_t calls_ = 0;
};

}  // namespace acrobat
