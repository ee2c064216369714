// The graph runtime every batched engine shares: the lazy dataflow graph the host programs record
// into, the placement of each node (inline depth, ghosts, phases), the flush through a scheduler
// strategy, and the execution of a batch up to the block executor that computes it. An engine is
// this runtime + a block executor (interpreted or compiled) + a host program (interpreted or
// generated) driven by runtime/instance_driver.h.
//
// Algorithm:
//  1. Recording. Each execution of a static block (analysis/blocks.h) becomes one node holding its
//     arguments as tensor references (aot::Val: lazy outputs of earlier nodes, or tensors that
//     exist). With inline depth, a node's phase is the latest phase among the pending values it
//     reads and its depth 1 + the deepest of them in that phase (ghost levels included; values an
//     earlier flush computed count as depth 0), computed right there; the node goes straight into
//     bucket [phase][depth][block] and no graph traversal follows (runtime/schedule.h).
//     Shared nodes (inline depth): a record whose block, arguments (the same tensors: the same
//     lazy outputs or the same existing tensor, such as one embedding row) and place equal those
//     of a node still pending is that node's computation again, since a block is a pure function
//     of its arguments. It gets a node id of its own (the host program has bound lazy handles to
//     it) that repeats the first: it is never run, its reads, references and adjoints are the
//     first node's. A batch of trees computes the leaf of a word once however often the word
//     occurs (in batches of 64 SST training trees, about half of the leaves are distinct words).
//  2. Flushing, by the scheduler: inline-depth runs the buckets as recorded (only what waiting
//     tensor reads demand, when some do); depth (DyNet) recomputes depths by one pass over the
//     pending nodes; agenda (DyNet) repeatedly runs, among the blocks with ready nodes, the one
//     whose ready nodes have the lowest average depth.
//  3. A batch: its nodes ordered by indexed weights (batched_kernels.h), escaping outputs allocated
//     as contiguous [B, ...] blocks from the buffer pool (buffer_pool.h), each argument classified
//     once as shared, strided in place or scattered (batch_operands.h), then cut into pieces of at
//     most an L2-sized chunk of instances that the threads take dynamically (thread_pool.h), each
//     piece handed to the block executor.
//  4. Release (analysis/ownership.h). Each output of a node counts its owners: the host values
//     holding it (one from the record when the program reads it after the block, then the host
//     program's dups and drops) and the pending nodes reading it (counted when they are recorded,
//     uncounted when their batch has run). A batch's buffer for one operator goes back to the pool
//     as soon as every row's count is zero; a count never rises again from zero, because only an
//     owner or a value borrowed from one can hand a reference over. Main's outputs stay owned by
//     the runtime until the run ends. With ACROBAT_POISON_RELEASED=1 in the environment a released
//     buffer is filled with NaN and kept out of use until the run ends, so that any read after a
//     release shows in the results (the test suite runs this way).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/plan.h"
#include "runtime/arena.h"
#include "runtime/batch_operands.h"
#include "runtime/buffer_pool.h"
#include "runtime/ragged_blocks.h"
#include "runtime/params.h"
#include "runtime/run_stats.h"
#include "runtime/schedule.h"
#include "runtime/thread_pool.h"

namespace acrobat {

enum class Scheduler { InlineDepth, Depth, Agenda };
const char* scheduler_name(Scheduler s);
// Parses "inline-depth", "depth" or "agenda"; anything else is a UserError listing them.
Scheduler parse_scheduler(const std::string& name);

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
  // By default: as many as keep the block's intermediate values in L2 (see graph.cpp).
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

// Rows a gather stacked (Graph::gathered): `count` rows of `row` floats at `out`, row k copied
// from the param row at gather_rows[begin + k].
struct Gather {
  const float* out;
  int64_t row;
  size_t begin, count;
};

class ForwardRecord;

class Graph {
 public:
  // `pool` (null: one thread) splits batches with enough work across its threads; `packed` holds
  // the parameters' packed weights. Graphs of one engine share both (graph_engine.h).
  Graph(const analysis::Plan& plan, std::shared_ptr<const PackedIndex> packed, Scheduler scheduler,
        std::shared_ptr<ThreadPool> pool);
  ~Graph();

  Scheduler scheduler() const { return scheduler_; }
  int threads() const { return pool_ ? pool_->size() : 1; }
  const analysis::Plan& plan() const { return plan_; }
  const PackedIndex& packed() const { return *packed_; }

  // Forgets the previous run's nodes and memory; counters of the new run go to `stats`. With
  // `keep_outputs` nothing is released before the next reset, and the values the blocks' kernels
  // compute in scratch buffers are kept as batch outputs too: what reverse mode reads
  // (forward_record()).
  void reset(RunStats& stats, bool keep_outputs = false);
  // What the run hands over to reverse mode once everything has run (reset with keep_outputs).
  ForwardRecord forward_record() const;
  // A tensor the host program stacked from rows of a param (a gather by a list of ids) at `out`,
  // `row` floats per row, row k copied from `sources[k]`. Kept by a training run (reset with
  // keep_outputs; ignored otherwise): reverse mode sends each row's adjoint to its source.
  bool keeps_values() const { return keep_values_; }
  void gathered(const float* out, int64_t row, std::span<const float* const> sources) {
    if (!keep_values_) return;
    gathers_.push_back({out, row, gather_rows_.size(), sources.size()});
    gather_rows_.insert(gather_rows_.end(), sources.begin(), sources.end());
  }
  // Records one execution of `block` reading `args` (one per block argument, then the values of
  // the block's size variables as ints); returns the node. A ragged block's instance whose sizes
  // break what only the run can check (analysis/ragged_plan.h) is a UserError at the operator.
  int32_t record(int32_t block, const aot::Val* args);
  // A host value hands a reference to lazy tensor `v` over / gives one up (see 4. above).
  void dup(const aot::Val& v) {
    if (!release_) return;
    int32_t& count = refs_[nodes_[v.node].ref_begin + v.lazy.slot];
    ACROBAT_ASSERT(count > 0, "a reference handed over by a value that owns none");
    ++count;
  }
  void drop(const aot::Val& v) {
    if (release_) unref(v.node, v.lazy.slot);
  }
  // Nodes recorded so far: the id the next record returns (generated code reads it directly).
  const int32_t* num_nodes() const { return &num_nodes_; }
  bool pending(int32_t node) const { return nodes_[first(node)].batch < 0; }
  // A tensor read waits for `node`: the next flush runs at least what it needs.
  void demand(int32_t node) { demanded_.push_back(first(node)); }
  // Runs what the demanded nodes need (inline depth), or everything pending, through `exec`.
  void flush(BlockExecutor& exec);
  double flush_seconds() const { return flush_seconds_; }

  // The data of a tensor that exists or has been computed.
  const float* data(const aot::Val& v) const {
    if (v.node < 0) return v.data;
    const Node& n = nodes_[first(v.node)];
    const float* out = batch_outputs_[n.batch][v.lazy.slot];
    ACROBAT_ASSERT(out, "a read of a released batch output");
    return out + output_offset(n.batch, v.lazy.slot, n.row);
  }

 private:
  friend class ForwardRecord;
  struct Node {
    int block;
    int phase = 0;
    int depth = 0;  // within its phase
    uint32_t arg_begin = 0;  // into args_: one per block argument
    int batch = -1;          // executed batch, -1 while pending
    int row = 0;             // the node's row within its batch
    uint32_t ref_begin = 0;  // into refs_: one per block operator
    uint32_t size_begin = 0;  // into sizes_: a ragged block's values of its size variables
    int32_t repeats = -1;     // a shared node: the node whose computation it is (1. above)
  };
  // The node that computes `node`'s outputs: itself, or the node a shared one repeats.
  int32_t first(int32_t node) const {
    const int32_t r = nodes_[node].repeats;
    return r < 0 ? node : r;
  }
  // The pending node that node `id` of `block`, its arguments stored from args_[arg_begin], at
  // `phase` and `depth` repeats, or -1 (then `id` is the one a later record may repeat).
  int32_t find_repeated(int32_t block, int phase, int depth, uint32_t arg_begin, int32_t id);

  void run_batch(BlockExecutor& exec, int block, const std::vector<int>& ids);
  // The parts of run_batch: the batch computed (a static block through `exec`, a ragged one
  // through ragged_), then its outputs released where nothing owns them and its counts taken.
  void run_static_batch(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch);
  void run_ragged_batch(int block, const std::vector<int>& ids, int batch);
  void finish_batch(int block, const std::vector<int>& ids, int batch);
  // Runs the pieces of piece_ends_ as body(first instance, end, thread): on this thread, or split
  // across the pool (and judged by split_guard_).
  template <class Body>
  void run_pieces(bool split, int64_t B, Body&& body);
  // The per-instance checks of a ragged block's sizes (`sizes`: the recorded values).
  void check_sizes(const analysis::StaticBlock& s, const aot::Val* sizes) const;
  // Floats of output `slot` of batch `batch`.
  size_t output_floats(int batch, int slot) const;
  // Where row `row`'s value starts in output `slot` of batch `batch`.
  int64_t output_offset(int batch, int slot, int row) const {
    const std::vector<int64_t>& offsets = batch_offsets_[batch];
    if (!offsets.empty())  // a ragged batch: packed, instance after instance
      return offsets[slot * (batch_sizes_[batch] + 1) + row];
    return row * plan_.blocks[batch_blocks_[batch]].ops[slot].size;
  }
  void run_by_traversal_depth(BlockExecutor& exec);
  void run_agenda(BlockExecutor& exec);
  std::vector<int> traversal_depths() const;
  template <class F>
  void pending_inputs(int n, F&& f) const;
  // One owner of output `slot` of `node` fewer.
  void unref(int32_t node, int32_t slot) {
    const Node& n = nodes_[first(node)];
    int32_t& count = refs_[n.ref_begin + slot];
    ACROBAT_ASSERT(count > 0, "a reference given up twice");
    if (--count == 0 && n.batch >= 0) row_released(n.batch, slot);
  }
  void row_released(int batch, int slot);
  void release_output(int batch, int slot);
  // Every batch output still held back to the pool.
  void release_all();

  const analysis::Plan& plan_;
  Scheduler scheduler_;
  std::shared_ptr<const PackedIndex> packed_;
  std::shared_ptr<ThreadPool> pool_;  // null: one thread
  std::vector<Arena> scratch_;        // per thread
  std::vector<KernelCounters> counters_;  // per thread
  BufferPool buffers_;  // escaping outputs
  bool release_;        // the plan's ownership analysis ran: outputs are released during the run
  bool share_;          // shared nodes (1. above): inline depth, unless the plan switched them off
  std::unordered_map<uint64_t, int32_t> repeatable_;  // hash of a record -> the pending node it was
  bool keep_values_ = false;  // reset with keep_outputs: the blocks' scratch buffers are kept too
  bool poison_ = false;  // ACROBAT_POISON_RELEASED: released buffers NaN-filled and held back

  RunStats* stats_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<aot::Val> args_;
  std::vector<std::vector<float*>> batch_outputs_;  // [batch][operator]; null once released
  std::vector<int64_t> batch_sizes_;                // [batch]: its nodes
  std::vector<int> batch_blocks_;                   // [batch]: its block
  std::vector<int32_t> refs_;                       // per node and operator: its owners
  std::vector<int64_t> sizes_;                      // ragged nodes' size values (Node::size_begin)
  // [batch]: for a ragged batch, per operator the offset of each row's values in its output and
  // the total after the last row ((B + 1) entries per operator); empty for any other batch.
  std::vector<std::vector<int64_t>> batch_offsets_;
  RaggedBlocks ragged_;
  std::vector<std::vector<int32_t>> live_rows_;     // [batch][operator]: rows with owners
  std::vector<std::pair<float*, size_t>> poisoned_;  // released, held back until the run ends
  int32_t num_nodes_ = 0;
  size_t first_pending_ = 0;  // depth and agenda: every node before it has run
  Buckets buckets_;           // inline depth
  std::vector<int> demanded_;
  std::vector<uint32_t> marks_;
  uint32_t stamp_ = 0;
  std::vector<std::vector<const float*>> rows_;  // per argument of the batch being run
  std::vector<int64_t> piece_ends_;              // of the batch being run (run_batch)
  SplitGuard split_guard_;                       // kept across runs, as the machine's load is
  std::vector<Gather> gathers_;            // of the run (gathered())
  std::vector<const float*> gather_rows_;  // their rows' sources
  double flush_seconds_ = 0;
};

// What a run reset with keep_outputs hands over to reverse mode (autodiff/reverse_mode.h) once
// everything has run: read-only, valid until the graph's next reset.
class ForwardRecord {
 public:
  explicit ForwardRecord(const Graph& g) : g_(g) {}
  const analysis::Plan& plan() const { return g_.plan_; }
  const PackedIndex& packed() const { return *g_.packed_; }
  // Whether every output was kept (reset with keep_outputs): nothing was released.
  bool kept() const { return !g_.release_; }
  size_t num_batches() const { return g_.batch_sizes_.size(); }
  int block(int batch) const { return g_.batch_blocks_[batch]; }
  // The nodes of each batch by row. Shared nodes are in none: their adjoints are the nodes' they
  // repeat.
  std::vector<std::vector<int>> nodes_by_row() const;
  // Node `node`'s row in its batch (a node that ran, not a shared one).
  int row(int32_t node) const { return g_.nodes_[node].row; }
  // The batch and row of the node that computes `node`'s outputs (a shared node's: the first's).
  std::pair<int, int> place(int32_t node) const {
    const Graph::Node& n = g_.nodes_[g_.first(node)];
    return {n.batch, n.row};
  }
  // Argument `e` of node `node`, as stored (a shared node's output as the first node's).
  const aot::Val& arg(int32_t node, size_t e) const { return g_.args_[g_.nodes_[node].arg_begin + e]; }
  // A ragged node's values of its size variables.
  const int64_t* sizes(int32_t node) const { return g_.sizes_.data() + g_.nodes_[node].size_begin; }
  // Output `slot` of batch `batch`: [B, size] rows in node order, or a ragged batch's packed.
  const float* output(int batch, int slot) const { return g_.batch_outputs_[batch][slot]; }
  int64_t output_offset(int batch, int slot, int row) const { return g_.output_offset(batch, slot, row); }
  size_t output_floats(int batch, int slot) const { return g_.output_floats(batch, slot); }
  const float* data(const aot::Val& v) const { return g_.data(v); }
  std::span<const Gather> gathers() const { return g_.gathers_; }
  const float* gathered_row(size_t i) const { return g_.gather_rows_[i]; }
  // The memory of the forward's values, all still held.
  size_t bytes_in_use() const { return g_.buffers_.bytes_in_use(); }

 private:
  const Graph& g_;
};

inline ForwardRecord Graph::forward_record() const { return ForwardRecord(*this); }

}  // namespace acrobat
