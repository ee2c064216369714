// Executing one batch (runtime/graph.h, 3.): its arguments classified once, cut into pieces of
// instances that the threads take dynamically, each piece handed to the block executor (a ragged
// block's to runtime/ragged_blocks.h); and whether splitting batches across threads pays.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/plan.h"
#include "runtime/arena.h"
#include "runtime/batch_operands.h"
#include "runtime/batch_outputs.h"
#include "runtime/node_store.h"
#include "runtime/ragged_blocks.h"
#include "runtime/run_stats.h"
#include "runtime/thread_pool.h"

namespace acrobat {

// What a block executor computes in one call: instances [0, B) of one static block.
struct BatchCall {
  const analysis::StaticBlock* block;
  int64_t B;
  const aot::Operand* args;  // one per block argument (batch_operands.h)
  float* const* outputs;     // one per block operator: [B, size] for escaping ones, else null
  int thread;                // which of the runtime's threads runs the call
  Arena* scratch;            // the thread's scratch memory, reset before the call
  int64_t* kernel_calls;     // the thread's count of kernel launches
};

class BlockExecutor {
 public:
  virtual ~BlockExecutor() = default;
  // How many instances of `s` one call should take (the runtime cuts larger parts into chunks).
  // By default: as many as keep the block's intermediate values in L2 (see batch_runner.cpp).
  virtual int64_t chunk_instances(const analysis::StaticBlock& s) const;
  virtual void run(const BatchCall& call) = 0;
  // The compiled adjoint of step `step` of `s`'s kernel plan (a fused loop), or null: then
  // reverse mode differentiates the loop's operators one by one.
  virtual aot::FusedAdjoint fused_adjoint(const analysis::StaticBlock& s, size_t step) const {
    (void)s;
    (void)step;
    return nullptr;
  }
};

// Whether splitting batches across threads pays. With another process on one of the cores a
// worker may get few cycles and a split batch can take longer than the calling thread alone would
// have. Each split batch is compared with that estimate (the calling thread's own speed on its
// pieces, times the whole batch); when a round of split batches saved nothing, batches run on one
// thread for a while, then splitting is tried again.
class SplitGuard {
 public:
  // Splitting is judged by rounds of kRound split batches. After a round that did not pay, batches
  // run on one thread for kBackoff batches, doubled after each further such round up to
  // kMaxBackoff, and reset when a round pays again. A round pays when its split batches took less
  // than kMustSave of what the calling thread alone would have: splitting must save a clear 5%, so
  // measurement noise favours one thread.
  static constexpr int kRound = 32;
  static constexpr int64_t kBackoff = 128, kMaxBackoff = 4096;
  static constexpr double kMustSave = 0.95;

  // Whether the next batch that has enough work should be split.
  bool split();
  // A split batch took `wall` seconds; the calling thread alone would have taken about `alone`
  // (`measured`: it ran at least one piece, so there is an estimate).
  void record(double wall, double alone, bool measured);

 private:
  double saved_ = 0;  // in the current round
  int batches_ = 0;   // split batches in the current round
  int64_t serial_left_ = 0;
  int64_t backoff_ = kBackoff;
};

// Runs batches for one graph on its threads: the pool (null: one thread), each thread's scratch
// memory and kernel counters, and the split guard, kept from run to run.
class BatchRunner {
 public:
  // `packed` holds the parameters' packed weights.
  BatchRunner(const analysis::Plan& plan, const PackedIndex& packed, std::shared_ptr<ThreadPool> pool);

  int threads() const { return pool_ ? pool_->size() : 1; }
  // A new run: the threads' scratch memory free and its peak forgotten.
  void reset();
  // Computes batch `batch` of `outputs`: nodes `ids` of `block` by row, through `exec` (a static
  // block) or ragged_blocks.h, its escaping outputs allocated (`keep_values`: and the values the
  // kernels compute in scratch buffers, for reverse mode).
  void run(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch, const NodeStore& nodes,
           BatchOutputs& outputs, bool keep_values);
  // The threads' kernel counters folded into `stats`; returns the peak of their scratch memory.
  int64_t fold_counters(RunStats& stats);

 private:
  // A static block's batch, through `exec`.
  void run_static(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch, const NodeStore& nodes,
                  BatchOutputs& outputs, bool keep_values);
  // A ragged block's batch, through ragged_blocks.h (its appends in growing storage unless
  // `keep_values`).
  void run_ragged(int block, const std::vector<int>& ids, int batch, const NodeStore& nodes,
                  BatchOutputs& outputs, bool keep_values);
  // Cuts the batch into piece_ends_ by cut(by_threads) (for the pool's threads, or as on one
  // thread) and returns whether its pieces go to the pool. `worth`: the batch has the work to be
  // split. The split guard is asked only for a batch of more than one piece.
  template <class Cut>
  bool cut_pieces(bool worth, bool keep_values, Cut&& cut);
  // Runs the pieces of piece_ends_ as body(first instance, end, thread): on this thread, or split
  // across the pool (and judged by split_guard_); a batch of one piece without a pool call.
  template <class Body>
  void run_pieces(bool split, bool keep_values, int64_t B, Body&& body);

  const analysis::Plan& plan_;
  const PackedIndex& packed_;
  std::shared_ptr<ThreadPool> pool_;      // null: one thread
  std::vector<Arena> scratch_;            // per thread
  std::vector<KernelCounters> counters_;  // per thread
  RaggedBlocks ragged_;
  std::vector<std::vector<const float*>> rows_;  // per argument of the batch being run
  std::vector<int64_t> piece_ends_;              // of the batch being run
  // Of the ragged batch being run, per operator and instance: where its growing values go and
  // whether their first operand already lies there (RaggedCall::grown); empty when none grows.
  std::vector<float*> grown_;
  std::vector<uint8_t> grown_in_place_;
  SplitGuard split_guard_;                       // kept across runs, as the machine's load is
};

}  // namespace acrobat
