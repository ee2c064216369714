// The nodes a run records (runtime/graph.h, 1.): per node its block, its place (phase and depth),
// its batch and row once it has run, its arguments and a ragged node's size values; and which
// pending node a record repeats (shared nodes).
#pragma once

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "acrobat/aot.h"
#include "analysis/plan.h"

namespace acrobat {

class NodeStore {
 public:
  // A node's batch before it runs, and that of a node dropped without running (its instance stopped
  // and nothing else needs it: Releaser::drop_unowned).
  static constexpr int kPending = -1;
  static constexpr int kDropped = -2;
  struct Node {
    int block;
    int phase = 0;
    int depth = 0;  // within its phase
    uint32_t arg_begin = 0;  // into the arguments: one per block argument
    int batch = kPending;    // executed batch, or kPending, or kDropped
    int row = 0;             // the node's row within its batch
    uint32_t ref_begin = 0;  // into the reference counts (releaser.h): one per block operator
    uint32_t size_begin = 0;  // into the size values: a ragged block's values of its size variables
    int32_t repeats = -1;     // a shared node: the node whose computation it is
    // The first node recorded reading one of its outputs (find_repeated), or -1.
    int32_t first_reader = -1;
  };

  explicit NodeStore(const analysis::Plan& plan) : plan_(plan) {}
  const analysis::Plan& plan() const { return plan_; }

  // Forgets every node.
  void clear();
  // Nodes recorded so far: the id the next record gets (generated code reads it directly).
  const int32_t* count() const { return &num_nodes_; }
  size_t size() const { return nodes_.size(); }
  const Node& operator[](int32_t node) const { return nodes_[node]; }
  Node& operator[](int32_t node) { return nodes_[node]; }
  // The node that computes `node`'s outputs: itself, or the node a shared one repeats.
  int32_t first(int32_t node) const {
    const int32_t r = nodes_[node].repeats;
    return r < 0 ? node : r;
  }
  // Argument `e` of node `node` as stored (a shared node's output as the first node's).
  const aot::Val& arg(int32_t node, size_t e) const { return args_[nodes_[node].arg_begin + e]; }
  const aot::Val* args(const Node& n) const { return &args_[n.arg_begin]; }
  // A ragged node's values of its size variables.
  const int64_t* sizes(const Node& n) const { return sizes_.data() + n.size_begin; }

  // The node a record of `block` reading `in_args` (one per block argument) makes, not added yet:
  // its arguments stored, a lazy one as the output of the node that computes it, and its place.
  Node place(int32_t block, const aot::Val* in_args);
  // The pending node that node `id` of `block`, its arguments stored from `arg_begin`, at `phase`
  // and `depth` repeats, or -1 (then `id` is the one a later record may repeat: it is added).
  int32_t find_repeated(int32_t block, int phase, int depth, uint32_t arg_begin, int32_t id);
  // Adds a shared node repeating `repeated` (its arguments, stored from `arg_begin`, dropped).
  void add_repeat(int32_t repeated, uint32_t arg_begin) {
    args_.resize(arg_begin);
    Node shared = nodes_[repeated];
    shared.repeats = repeated;
    nodes_.push_back(shared);
    ++num_nodes_;
  }
  // Stores the values of a ragged node's size variables (`sizes`, as recorded); returns where.
  uint32_t add_sizes(const analysis::StaticBlock& s, const aot::Val* sizes) {
    const auto begin = static_cast<uint32_t>(sizes_.size());
    for (size_t z = 0; z < s.sizes.size(); ++z) sizes_.push_back(sizes[z].i);
    return begin;
  }
  Node& add(const Node& n) {
    ++num_nodes_;
    return nodes_.emplace_back(n);
  }
  // f(m) for each pending node m that node n reads.
  template <class F>
  void pending_inputs(int n, F&& f) const {
    const Node& node = nodes_[n];
    size_t count = plan_.blocks[node.block].args.size();
    for (size_t a = 0; a < count; ++a) {
      const aot::Val& v = args_[node.arg_begin + a];
      if (v.node >= 0 && nodes_[v.node].batch < 0) f(static_cast<int>(v.node));
    }
  }
  // The per-instance checks of a ragged block's sizes (`sizes`: the recorded values): an instance
  // that breaks what only the run can check (analysis/ragged_plan.h) is a UserError at the
  // operator.
  void check_sizes(const analysis::StaticBlock& s, const aot::Val* sizes) const;

 private:
  const analysis::Plan& plan_;
  std::vector<Node> nodes_;
  std::vector<aot::Val> args_;
  std::vector<int64_t> sizes_;                        // ragged nodes' size values (size_begin)
  // Whether node `c` is a pending node of `block` at `phase` and `depth` reading `args`.
  bool same_record(int32_t c, int32_t block, int phase, int depth, const aot::Val* args, size_t n) const;

  // Hash of a record -> the pending node it was, for the records find_repeated hashes. An
  // open-addressing table: a node-based map spent a third of the host time of a small tree model
  // in malloc and pointer chasing.
  absl::flat_hash_map<uint64_t, int32_t> repeatable_;
  int32_t num_nodes_ = 0;
};

}  // namespace acrobat
