// The graph runtime every batched engine shares: the lazy dataflow graph the host programs record
// into, the placement of each node (inline depth, ghosts, phases), the flush through a scheduler
// strategy, and the execution of a batch up to the block executor that computes it. An engine is
// this runtime + a block executor (interpreted or compiled) + a host program (interpreted or
// generated) driven by runtime/instance_driver.h. Graph is the facade the engines and the generated
// code call; each concern is a part of its own: the nodes (node_store.h), the scheduler strategies
// (schedule.h), a batch's execution and its split across threads (batch_runner.h), the batches'
// outputs (batch_outputs.h), release (releaser.h), and what reverse mode reads (forward_record.h).
//
// Algorithm:
//  1. Recording (node_store.h). Each execution of a static block (analysis/blocks.h) becomes one
//     node holding its arguments as tensor references (aot::Val: lazy outputs of earlier nodes, or
//     tensors that exist). With inline depth, a node's phase is the latest phase among the pending
//     values it reads and its depth 1 + the deepest of them in that phase (ghost levels included;
//     values an earlier flush computed count as depth 0), computed right there; the node goes
//     straight into bucket [phase][depth][block] and no graph traversal follows
//     (runtime/schedule.h).
//     Shared nodes (inline depth): a record whose block, arguments (the same tensors: the same lazy
//     outputs or the same existing tensor, such as one embedding row) and place equal those of a
//     node still pending is that node's computation again, since a block is a pure function of its
//     arguments. It gets a node id of its own (the host program has bound lazy handles to it) that
//     repeats the first: it is never run, and its reads and references are the first node's. A
//     batch of trees computes the leaf of a word once however often the word occurs (in batches of
//     64 SST training trees, about half of the leaves are distinct words). Only records whose
//     every lazy argument some record has read before are hashed (NodeStore::find_repeated).
//  2. Flushing, by the scheduler (schedule.h): inline-depth runs the buckets as recorded (only what
//     waiting tensor reads demand, when some do); depth (DyNet) recomputes depths by one pass over
//     the pending nodes; agenda (DyNet) repeatedly runs, among the blocks with ready nodes, the one
//     whose ready nodes have the lowest average depth.
//  3. A batch (batch_runner.h): its nodes ordered by indexed weights (batched_kernels.h), escaping
//     outputs allocated as contiguous [B, ...] blocks from the buffer pool (buffer_pool.h), each
//     argument classified once as shared, strided in place or scattered (batch_operands.h), then
//     cut into pieces of at most an L2-sized chunk of instances that the threads take dynamically
//     (thread_pool.h), each piece handed to the block executor.
//  4. Release (analysis/ownership.h, releaser.h). Each output of a node counts its owners: the host
//     values holding it (one from the record when the program reads it after the block, then the
//     host program's dups and drops) and the pending nodes reading it (counted when they are
//     recorded, uncounted when their batch has run). A batch's buffer for one operator goes back to
//     the pool as soon as every row's count is zero; a count never rises again from zero, because
//     only an owner or a value borrowed from one can hand a reference over. Main's outputs stay
//     owned by the runtime until the run ends. An open run (continuous batching) counts the host
//     references per node as well: an instance that stops (cancelled or failed) gives up every
//     reference its values held, and its pending nodes that nothing else needs any more are dropped,
//     never run (drop_instance). With ACROBAT_POISON_RELEASED=1 in the environment a
//     released buffer is filled with NaN and kept out of use until the run ends, so that any read
//     after a release shows in the results (the test suite runs this way).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/plan.h"
#include "runtime/batch_outputs.h"
#include "runtime/batch_runner.h"
#include "runtime/forward_record.h"
#include "runtime/node_store.h"
#include "runtime/params.h"
#include "runtime/releaser.h"
#include "runtime/run_stats.h"
#include "runtime/schedule.h"
#include "runtime/thread_pool.h"

namespace acrobat {

class Graph {
 public:
  // `pool` (null: one thread) splits batches with enough work across its threads; `packed` holds
  // the parameters' packed weights. Graphs of one engine share both (graph_engine.h).
  Graph(const analysis::Plan& plan, std::shared_ptr<const PackedIndex> packed, Scheduler scheduler,
        std::shared_ptr<ThreadPool> pool);
  ~Graph();

  Scheduler scheduler() const { return schedule_.scheduler(); }
  int threads() const { return runner_.threads(); }
  const analysis::Plan& plan() const { return plan_; }
  const PackedIndex& packed() const { return *packed_; }

  // Forgets the previous run's nodes and memory; counters of the new run go to `stats`. With
  // `keep_outputs` nothing is released before the next reset, and the values the blocks' kernels
  // compute in scratch buffers are kept as batch outputs too: what reverse mode reads
  // (forward_record()). With `by_instance` (an open run, whose instances may stop anywhere) the
  // nodes and host references are kept per instance as well, for drop_instance().
  void reset(RunStats& stats, bool keep_outputs = false, bool by_instance = false);
  // What the run hands over to reverse mode once everything has run (reset with keep_outputs).
  ForwardRecord forward_record() const {
    return ForwardRecord(plan_, *packed_, nodes_, outputs_, gathers_, !releaser_.enabled());
  }
  // A tensor the host program stacked from rows of a param (a gather by a list of ids) at `out`,
  // `row` floats per row, row k copied from `sources[k]`. Kept by a training run (reset with
  // keep_outputs; ignored otherwise) for reverse mode (forward_record.h).
  bool keeps_values() const { return keep_values_; }
  void gathered(const float* out, int64_t row, std::span<const float* const> sources) {
    if (keep_values_) gathers_.add(out, row, sources);
  }
  // Records one execution of `block` reading `args` (one per block argument, then the values of
  // the block's size variables as ints) for instance `instance`'s host program; returns the node.
  // A ragged block's instance whose sizes break what only the run can check
  // (analysis/ragged_plan.h) is a UserError at the operator.
  int32_t record(int32_t block, const aot::Val* args, int64_t instance = 0);
  // A host value hands a reference to lazy tensor `v` over / gives one up (see 4. above).
  void dup(const aot::Val& v) {
    if (!releaser_.enabled()) return;
    releaser_.hand_over(nodes_[v.node].ref_begin + v.lazy.slot);
    releaser_.held(v.node, v.lazy.slot, 1);
  }
  void drop(const aot::Val& v) {
    if (!releaser_.enabled()) return;
    releaser_.unref(nodes_[nodes_.first(v.node)], v.lazy.slot, outputs_);
    releaser_.held(v.node, v.lazy.slot, -1);
  }
  // Instance `instance` of an open run (reset with by_instance) has stopped, cancelled or failed,
  // and its host program will not run again: the references its values held are given up, and its
  // pending nodes that nothing else needs (no other instance's repeat, no node of theirs reads
  // them) are dropped and never run, their inputs' memory released where nothing else holds it
  // (Releaser::drop_unowned). Counted in RunStats::dropped_nodes.
  void drop_instance(int64_t instance);
  // Nodes recorded so far: the id the next record returns (generated code reads it directly).
  const int32_t* num_nodes() const { return nodes_.count(); }
  bool pending(int32_t node) const { return nodes_[nodes_.first(node)].batch < 0; }
  // A tensor read waits for `node`: the next flush runs at least what it needs.
  void demand(int32_t node) { schedule_.demand(nodes_.first(node)); }
  // Drops the demands made so far: the next flush runs what is demanded from here on (with inline
  // depth). A read whose demand went waits on after that flush and demands again (an open run
  // computes the reads of some instances ahead of the others').
  void forget_demands() { schedule_.forget_demands(); }
  // Runs what the demanded nodes need (inline depth), or everything pending, through `exec`.
  void flush(BlockExecutor& exec);
  // Called after each batch of a flush (none: null), on the flushing thread: an open run shares its
  // thread with other work there (InstanceFeed::may_yield).
  void set_between_batches(std::function<void()> f) { between_batches_ = std::move(f); }
  double flush_seconds() const { return flush_seconds_; }

  // The data of a tensor that exists or has been computed.
  const float* data(const aot::Val& v) const { return outputs_.data(nodes_, v); }

 private:
  // Runs one batch: nodes `ids` of `block` ordered by indexed weights, computed, their outputs
  // released where nothing owns them, and counted.
  void run_batch(BlockExecutor& exec, int block, const std::vector<int>& ids);

  const analysis::Plan& plan_;
  std::shared_ptr<const PackedIndex> packed_;
  bool share_;                // shared nodes (1. above): inline depth, unless the plan switched them off
  bool keep_values_ = false;  // reset with keep_outputs: the blocks' scratch buffers are kept too
  RunStats* stats_ = nullptr;
  NodeStore nodes_;
  BatchOutputs outputs_;
  Releaser releaser_;
  Schedule schedule_;
  BatchRunner runner_;
  Gathers gathers_;  // of the run (gathered())
  // Reset with by_instance (and the releaser counting by node): per instance, the nodes it recorded.
  std::vector<std::vector<int32_t>> by_instance_nodes_;
  int64_t dropped_ = 0;                             // nodes dropped in the run (drop_instance)
  double flush_seconds_ = 0;
  std::function<void()> between_batches_;
};

}  // namespace acrobat
