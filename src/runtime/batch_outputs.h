// The outputs of the batches a run has executed: per batch its block and size, and per operator
// the buffer (from the buffer pool) its escaping values lie in, [B, size] or a ragged batch's
// packed; where a node's output row lies, which is what a tensor read reads.
#pragma once

#include <cstdint>
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
    const float* out = outputs_[n.batch][v.lazy.slot];
    ACROBAT_ASSERT(out, "a read of a released batch output");
    return out + output_offset(n.batch, v.lazy.slot, n.row);
  }
  BufferPool& buffers() { return buffers_; }
  const BufferPool& buffers() const { return buffers_; }

 private:
  const analysis::Plan& plan_;
  BufferPool buffers_;                           // the outputs' memory
  std::vector<std::vector<float*>> outputs_;     // [batch][operator]; null once released
  std::vector<int64_t> sizes_;                   // [batch]: its nodes
  std::vector<int> blocks_;                      // [batch]: its block
  std::vector<std::vector<int64_t>> offsets_;    // [batch]: a ragged batch's (offsets())
};

}  // namespace acrobat
