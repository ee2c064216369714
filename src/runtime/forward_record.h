// What a run kept for reverse mode (autodiff/reverse_mode.h) hands over once everything has run: a
// read-only view of its nodes, batches and outputs, and the gathers the host program recorded.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "acrobat/aot.h"
#include "analysis/plan.h"
#include "runtime/batch_operands.h"
#include "runtime/batch_outputs.h"
#include "runtime/node_store.h"

namespace acrobat {

// Rows a gather stacked (Graph::gathered): `count` rows of `row` floats at `out`, row k copied
// from the param row at rows[begin + k] of its Gathers.
struct Gather {
  const float* out;
  int64_t row;
  size_t begin, count;
};

// The gathers of one run.
struct Gathers {
  std::vector<Gather> gathers;
  std::vector<const float*> rows;  // their rows' sources
  void add(const float* out, int64_t row, std::span<const float* const> sources) {
    gathers.push_back({out, row, rows.size(), sources.size()});
    rows.insert(rows.end(), sources.begin(), sources.end());
  }
  void clear() {
    gathers.clear();
    rows.clear();
  }
};

// Valid until the graph's next reset.
class ForwardRecord {
 public:
  ForwardRecord(const analysis::Plan& plan, const PackedIndex& packed, const NodeStore& nodes,
                const BatchOutputs& outputs, const Gathers& gathers, bool kept)
      : plan_(plan), packed_(packed), nodes_(nodes), outputs_(outputs), gathers_(gathers), kept_(kept) {}
  const analysis::Plan& plan() const { return plan_; }
  const PackedIndex& packed() const { return packed_; }
  // Whether every output was kept (reset with keep_outputs): nothing was released.
  bool kept() const { return kept_; }
  size_t num_batches() const { return outputs_.size(); }
  int block(int batch) const { return outputs_.block(batch); }
  // The nodes of each batch by row. Shared nodes are in none: their adjoints are the nodes' they
  // repeat.
  std::vector<std::vector<int>> nodes_by_row() const;
  // Node `node`'s row in its batch (a node that ran, not a shared one).
  int row(int32_t node) const { return nodes_[node].row; }
  // The batch and row of the node that computes `node`'s outputs (a shared node's: the first's).
  std::pair<int, int> place(int32_t node) const {
    const NodeStore::Node& n = nodes_[nodes_.first(node)];
    return {n.batch, n.row};
  }
  // Argument `e` of node `node`, as stored (a shared node's output as the first node's).
  const aot::Val& arg(int32_t node, size_t e) const { return nodes_.arg(node, e); }
  // A ragged node's values of its size variables.
  const int64_t* sizes(int32_t node) const { return nodes_.sizes(nodes_[node]); }
  // Output `slot` of batch `batch`: [B, size] rows in node order, or a ragged batch's packed.
  const float* output(int batch, int slot) const { return outputs_.output(batch, slot); }
  int64_t output_offset(int batch, int slot, int row) const { return outputs_.output_offset(batch, slot, row); }
  size_t output_floats(int batch, int slot) const { return outputs_.output_floats(batch, slot); }
  const float* data(const aot::Val& v) const { return outputs_.data(nodes_, v); }
  std::span<const Gather> gathers() const { return gathers_.gathers; }
  const float* gathered_row(size_t i) const { return gathers_.rows[i]; }
  // The memory of the forward's values, all still held.
  size_t bytes_in_use() const { return outputs_.buffers().bytes_in_use(); }

 private:
  const analysis::Plan& plan_;
  const PackedIndex& packed_;
  const NodeStore& nodes_;
  const BatchOutputs& outputs_;
  const Gathers& gathers_;
  bool kept_;
};

}  // namespace acrobat
