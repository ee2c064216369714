// The outputs of the batches a run has executed: per batch its block and size, and per operator
// the buffer (from the buffer pool) its escaping values lie in, [B, size] or a ragged batch's
// packed, or, for an append operator (analysis/ragged_plan.h, 6.), growing storage row by row;
// where a node's output row lies, which is what a tensor read reads.
//
// Growing storage. An append operator's values (a cache one row longer per decode step) lie, when
// the run keeps no values for reverse mode, each in a store of its own from the pool with spare
// capacity: the first append onto a value copies it into a store of twice the new length, and
// each later append onto the store's latest value writes its new rows after it and shares the
// store, so that T steps copy O(T) rows, not O(T^2). Every value in a store is a prefix of it,
// starting at its data, and no append ever writes below the store's `used` mark: a value read
// later still finds its rows. An append onto an earlier prefix (hypotheses forked from one cache,
// after the first fork has appended) copies the prefix into a store of its own: shared prefixes
// are copied only where they diverge. A store goes back to the pool with its last row (releaser.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/plan.h"
#include "runtime/buffer_pool.h"
#include "runtime/node_store.h"
#include "support/diagnostics.h"

namespace acrobat {

class BatchOutputs {
 public:
  explicit BatchOutputs(const analysis::Plan& plan) : plan_(plan) {}

  // Forgets every batch (their buffers already given back: Releaser::release_all).
  void clear();
  // A new batch of `B` nodes of `block`, no output allocated yet; returns its index.
  int add(int block, int64_t B);
  size_t size() const { return outputs_.size(); }
  int block(int batch) const { return blocks_[batch]; }
  int64_t batch_size(int batch) const { return sizes_[batch]; }
  // Output `slot` of batch `batch`, null before it is allocated and once released.
  float*& output(int batch, int slot) { return outputs_[batch][slot]; }
  float* output(int batch, int slot) const { return outputs_[batch][slot]; }
  std::vector<float*>& outputs(int batch) { return outputs_[batch]; }
  // Per operator of a ragged batch, the offset of each row's values in its output and the total
  // after the last row ((B + 1) entries per operator); empty for any other batch.
  std::vector<int64_t>& offsets(int batch) { return offsets_[batch]; }
  // Floats of output `slot` of batch `batch`.
  size_t output_floats(int batch, int slot) const;
  // Where row `row`'s value starts in output `slot` of batch `batch`.
  int64_t output_offset(int batch, int slot, int row) const {
    const std::vector<int64_t>& offsets = offsets_[batch];
    if (!offsets.empty())  // a ragged batch: packed, instance after instance
      return offsets[slot * (sizes_[batch] + 1) + row];
    return row * plan_.blocks[blocks_[batch]].ops[slot].size;
  }
  // The data of a tensor that exists or has been computed.
  const float* data(const NodeStore& nodes, const aot::Val& v) const {
    if (v.node < 0) return v.data;
    const NodeStore::Node& n = nodes[nodes.first(v.node)];
    if (int32_t store = store_of(n.batch, v.lazy.slot, n.row); store >= 0) {
      ACROBAT_ASSERT(stores_[store].data, "a read of a released store");
      return stores_[store].data;
    }
    const float* out = outputs_[n.batch][v.lazy.slot];
    ACROBAT_ASSERT(out, "a read of a released batch output");
    return out + output_offset(n.batch, v.lazy.slot, n.row);
  }

  // ---- growing storage ----
  // The store holding row `row` of output `slot` of batch `batch`, or -1 when the output is no
  // growing one.
  int32_t store_of(int batch, int slot, int row) const {
    const std::vector<std::vector<int32_t>>& g = grown_[batch];
    return g.empty() || g[slot].empty() ? -1 : g[slot][row];
  }
  // Output `slot` of batch `batch` (B rows) lies in growing storage, no row placed yet.
  void grow(int batch, int slot);
  // Places row `row` of output `slot` of batch `batch`, the append of `new_elems` floats onto
  // `old` (`old_elems` floats): in `old`'s store when `old` is its latest value and there is room
  // (returns true: old's floats already lie there), else in a new store (returns false). Returns
  // where the row's value goes in `*data`.
  bool place_appended(int batch, int slot, int row, const NodeStore& nodes, const aot::Val& old,
                      int64_t old_elems, int64_t new_elems, float** data);
  // Row `row` of grown output `slot` of `batch` is owned no more: its store loses a row, and the
  // memory to give back (the store's, with its last row) is returned, else {null, 0}.
  std::pair<float*, size_t> release_grown_row(int batch, int slot, int row);
  // Every store still held, given up: the memory to give back.
  std::vector<std::pair<float*, size_t>> release_stores();

  BufferPool& buffers() { return buffers_; }
  const BufferPool& buffers() const { return buffers_; }

 private:
  const analysis::Plan& plan_;
  BufferPool buffers_;                           // the outputs' memory
  std::vector<std::vector<float*>> outputs_;     // [batch][operator]; null once released
  std::vector<int64_t> sizes_;                   // [batch]: its nodes
  std::vector<int> blocks_;                      // [batch]: its block
  std::vector<std::vector<int64_t>> offsets_;    // [batch]: a ragged batch's (offsets())
  struct Store {
    float* data = nullptr;  // null once given back
    size_t capacity = 0;    // floats
    int64_t used = 0;       // floats: the longest value in it
    int32_t rows = 0;       // batch output rows whose value lies in it, not yet released
  };
  std::vector<Store> stores_;                            // of the run
  std::vector<std::vector<std::vector<int32_t>>> grown_;  // [batch][operator][row]: its store
};

}  // namespace acrobat
