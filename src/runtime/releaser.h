// Release during a run (runtime/graph.h, 4.): each node output row counts its owners, and a batch's
// buffer for one operator goes back to the pool once no row of it has any (a growing output's
// store once no row in it has any: batch_outputs.h); with
// ACROBAT_POISON_RELEASED=1 it is NaN-filled and held back until the run ends instead.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "analysis/plan.h"
#include "runtime/batch_outputs.h"
#include "runtime/node_store.h"
#include "support/diagnostics.h"

namespace acrobat {

class Releaser {
 public:
  Releaser();

  // A new run: outputs are released during it when `enabled` (the plan's ownership analysis ran
  // and the run does not keep its outputs); no counts yet. With `by_node` (an open run, whose
  // instances may stop anywhere) the host references are also counted per node, a shared node's
  // apart from the first's: what each node's own handles hold (held(), drop_unowned()).
  void reset(bool enabled, bool by_node = false);
  bool enabled() const { return enabled_; }
  // Counts of a new node of `block` reading `args`: one more owner of each lazy argument (the node
  // reads it until its batch has run), and the node's own outputs owned by the host program as
  // `owned` says. Returns where its counts begin (Node::ref_begin).
  uint32_t add_node(const std::vector<uint8_t>& owned, const aot::Val* args, size_t num_args,
                    const NodeStore& nodes);
  // A shared node's host references (`owned`) count on the first node's, from `ref_begin`.
  void share(const std::vector<uint8_t>& owned, uint32_t ref_begin) {
    for (size_t k = 0; k < owned.size(); ++k) refs_[ref_begin + k] += owned[k];
  }
  // A host value hands over a reference to count `ref`.
  void hand_over(uint32_t ref) {
    int32_t& count = refs_[ref];
    ACROBAT_ASSERT(count > 0, "a reference handed over by a value that owns none");
    ++count;
  }
  // Counted by node (reset with by_node): node `id` was recorded, its host program owning its
  // outputs as `owned` says; a handle to output `slot` of node `id` is handed over (+1) or given
  // up (-1). No-ops otherwise.
  void held_from(int32_t id, const std::vector<uint8_t>& owned) {
    if (!by_node_) return;
    ACROBAT_ASSERT(held_begin_.size() == static_cast<size_t>(id), "nodes counted by node out of order");
    held_begin_.push_back(static_cast<uint32_t>(held_.size()));
    held_.insert(held_.end(), owned.begin(), owned.end());
  }
  bool by_node() const { return by_node_; }
  void held(int32_t id, int32_t slot, int32_t delta) {
    if (by_node_) held_[held_begin_[static_cast<size_t>(id)] + static_cast<uint32_t>(slot)] += delta;
  }
  // The host program that holds the handles to nodes `ids` will not run again (its instance
  // stopped, or failed): every reference they hold is given up (counted by node: reset with
  // by_node), and a pending node left with no owner of any output is dropped, never to run, its
  // references to its inputs given up in turn. Memory nothing owns any more goes back. Returns the
  // nodes dropped.
  int64_t drop_unowned(std::span<const int32_t> ids, NodeStore& nodes, BatchOutputs& outputs);
  // One owner of output `slot` of `n` (the node computing it) fewer.
  void unref(const NodeStore::Node& n, int32_t slot, BatchOutputs& outputs) {
    int32_t& count = refs_[n.ref_begin + slot];
    ACROBAT_ASSERT(count > 0, "a reference given up twice");
    if (--count == 0 && n.batch >= 0) row_released(n.batch, slot, n.row, outputs);
  }
  // Batch `batch` (nodes `ids` of `s`) has run: its outputs nothing owns go back, then its nodes'
  // references to their inputs.
  void batch_ran(const analysis::StaticBlock& s, const std::vector<int>& ids, int batch, const NodeStore& nodes,
                 BatchOutputs& outputs);
  // Every batch output still held, and every poisoned one, back to the pool.
  void release_all(BatchOutputs& outputs);

 private:
  void row_released(int batch, int slot, int row, BatchOutputs& outputs);
  void release_output(int batch, int slot, BatchOutputs& outputs);
  // Memory nothing reaches any more back to the pool (or poisoned and held back).
  void give_back(float* p, size_t n, BatchOutputs& outputs);

  bool enabled_ = false;
  bool poison_ = false;                              // ACROBAT_POISON_RELEASED
  bool by_node_ = false;                             // reset with by_node
  std::vector<int32_t> refs_;                        // per node and operator: its owners
  std::vector<uint32_t> held_begin_;                 // by_node: per node id, into held_
  std::vector<int32_t> held_;                        // by_node: per node id and operator: its handles'
  std::vector<std::vector<int32_t>> live_rows_;      // [batch][operator]: rows with owners
  std::vector<std::pair<float*, size_t>> poisoned_;  // released, held back until the run ends
};

}  // namespace acrobat
