// Which pending dataflow-graph nodes run together, and when (runtime/graph.h, 2.): the scheduler
// strategies behind Schedule, and the inline-depth schedule shared by the batched and AOT engines:
// pending nodes in buckets [phase][depth][block], filled as the host program records them, and run
// bucket by bucket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/run_stats.h"
#include "support/function_ref.h"

namespace acrobat {

// [phase][depth][block] -> pending node ids, in recording order.
using Buckets = std::vector<std::vector<std::vector<std::vector<int>>>>;

// Where a node goes: it starts at (phase 0, depth 0) and takes in each input. A pending input sits
// at (in_phase, in_depth) and reaches the node through `phase_ends` phase ends and `ghost` ghost
// levels (analysis/depth.h); the node then lies one level below the latest, deepest of them. An
// input an earlier flush computed counts as depth 0 of its phase: its own depth belonged to buckets
// that are gone, but its ghost levels still line the node up with the nodes of the longer branch
// (an `if` returning either a state read earlier or a pending transform of it, say).
struct Placement {
  int phase = 0;
  int depth = 0;
  void add_input(int in_phase, int in_depth, int32_t phase_ends, int32_t ghost) {
    int p = clamp(int64_t{in_phase} + phase_ends);
    int d = clamp(int64_t{phase_ends > 0 ? 0 : in_depth} + ghost);
    if (p > phase) {
      phase = p;
      depth = d;
    } else if (p == phase && d > depth) {
      depth = d;
    }
  }
  void add_computed_input(int in_phase, int32_t phase_ends, int32_t ghost) {
    add_input(in_phase, 0, phase_ends, ghost);
  }
  int node_depth() const { return clamp(int64_t{depth} + 1); }

 private:
  // Levels beyond any bucket a run can fill: a value saturated there still lies after its inputs.
  static int clamp(int64_t v) { return v > kMaxLevel ? kMaxLevel : static_cast<int>(v); }
  static constexpr int64_t kMaxLevel = int64_t{1} << 30;
};

inline void add_to_bucket(Buckets& buckets, int phase, int depth, int block, int node) {
  if (buckets.size() <= static_cast<size_t>(phase)) buckets.resize(phase + 1);
  auto& by_depth = buckets[phase];
  if (by_depth.size() <= static_cast<size_t>(depth)) by_depth.resize(depth + 1);
  auto& row = by_depth[depth];
  if (row.size() <= static_cast<size_t>(block)) row.resize(block + 1);
  row[block].push_back(node);
}

// Runs every pending node, bucket by bucket: run(block, ids) executes one batch.
template <class Run>
void run_all(Buckets& buckets, Run&& run) {
  for (auto& phase : buckets)
    for (auto& row : phase)
      for (size_t b = 0; b < row.size(); ++b)
        if (!row[b].empty()) {
          run(static_cast<int>(b), row[b]);
          row[b].clear();  // its capacity kept: the next run records as many nodes there
        }
}

// Forgets every pending node, keeping the buckets' memory for the next run.
inline void empty_buckets(Buckets& buckets) {
  for (auto& phase : buckets)
    for (auto& row : phase)
      for (auto& bucket : row) bucket.clear();
}

// Runs only what tensor reads wait for: the `demanded` nodes and, transitively, the pending nodes
// they read (inputs(n, f) calls f(m) for each pending node m that node n reads), bucket by bucket.
// Everything else stays in its bucket for a later, larger batch: with fibers, work nobody waits for
// yet (e.g. the combination steps on the way back up a recursion) keeps accumulating across
// flushes instead of running a few nodes at a time.
//
// A batch that runs anyway takes along every other pending node of its block and phase, at its
// depth or deeper, whose inputs are all computed by then. That costs no launch, and each of them
// would otherwise need a later one. Two cases this catches: leaf encodings of a whole sentence
// computed up front (SPINN) but demanded a word at a time run as one batch; and a step whose input
// was computed by an earlier flush lies a level shallower than the same step of an instance whose
// input is still pending (a SHIFT's leaf against a REDUCE's composition), yet both run together.
// `marks` and `stamp` are scratch kept by the caller (no clearing per call).
template <class Inputs, class Run>
void run_demanded(Buckets& buckets, const std::vector<int>& demanded, size_t num_nodes,
                  std::vector<uint32_t>& marks, uint32_t& stamp, Inputs&& inputs, Run&& run) {
  if (marks.size() < num_nodes) marks.resize(num_nodes, 0);
  ++stamp;
  std::vector<int> stack(demanded.begin(), demanded.end());
  while (!stack.empty()) {
    int n = stack.back();
    stack.pop_back();
    if (marks[n] == stamp) continue;
    marks[n] = stamp;
    inputs(n, [&](int m) {
      if (marks[m] != stamp) stack.push_back(m);
    });
  }
  auto ready = [&](int n) {
    bool all = true;
    inputs(n, [&](int) { all = false; });
    return all;
  };
  std::vector<int> needed, rest;
  for (auto& phase : buckets)
    for (size_t d = 0; d < phase.size(); ++d)
      for (size_t b = 0; b < phase[d].size(); ++b) {
        std::vector<int>& bucket = phase[d][b];
        if (bucket.empty()) continue;
        needed.clear();
        for (int n : bucket)
          if (marks[n] == stamp) needed.push_back(n);
        if (needed.empty()) continue;
        // The marked nodes of earlier buckets have run: what is left here and deeper in this block
        // either is ready now or waits for a later flush.
        for (size_t e = d; e < phase.size(); ++e) {
          if (b >= phase[e].size()) continue;
          std::vector<int>& other = phase[e][b];
          rest.clear();
          for (int n : other) {
            if (e == d && marks[n] == stamp) continue;  // already in `needed`
            if (ready(n)) {
              marks[n] = stamp;
              needed.push_back(n);
            } else {
              rest.push_back(n);
            }
          }
          other.swap(rest);
        }
        run(static_cast<int>(b), needed);
      }
}

enum class Scheduler { InlineDepth, Depth, Agenda };
const char* scheduler_name(Scheduler s);
// Parses "inline-depth", "depth" or "agenda"; anything else is a UserError listing them.
Scheduler parse_scheduler(const std::string& name);

class NodeStore;

// A graph's pending nodes under its scheduler: inline-depth runs the buckets as recorded (only what
// waiting tensor reads demand, when some do); depth (DyNet) recomputes depths by one pass over the
// pending nodes; agenda (DyNet) repeatedly runs, among the blocks with ready nodes, the one whose
// ready nodes have the lowest average depth.
class Schedule {
 public:
  explicit Schedule(Scheduler scheduler) : scheduler_(scheduler) {}
  Scheduler scheduler() const { return scheduler_; }
  // Forgets every pending node.
  void clear() {
    empty_buckets(buckets_);
    demanded_.clear();
    first_pending_ = 0;
  }
  // Node `id` of `block` was recorded at `phase` and `depth`.
  void recorded(int phase, int depth, int block, int32_t id) {
    if (scheduler_ == Scheduler::InlineDepth) add_to_bucket(buckets_, phase, depth, block, id);
  }
  // A tensor read waits for `node` (the node that computes it): the next flush runs at least what
  // it needs.
  void demand(int32_t node) { demanded_.push_back(node); }
  // Drops the demands made so far (Graph::forget_demands).
  void forget_demands() { demanded_.clear(); }
  // Runs what the demanded nodes need (inline depth), or everything pending, batch by batch:
  // run(block, ids) executes one. The time spent choosing goes to stats.schedule_seconds.
  void flush(const NodeStore& nodes, RunStats& stats, FunctionRef<void(int, const std::vector<int>&)> run);

 private:
  void run_by_traversal_depth(const NodeStore& nodes, RunStats& stats,
                              FunctionRef<void(int, const std::vector<int>&)> run);
  void run_agenda(const NodeStore& nodes, RunStats& stats, FunctionRef<void(int, const std::vector<int>&)> run);
  std::vector<int> traversal_depths(const NodeStore& nodes) const;

  Scheduler scheduler_;
  Buckets buckets_;  // inline depth
  std::vector<int> demanded_;
  std::vector<uint32_t> marks_;  // run_demanded's scratch
  uint32_t stamp_ = 0;
  size_t first_pending_ = 0;  // depth and agenda: every node before it has run
};

}  // namespace acrobat
