#include "runtime/graph.h"

#include <algorithm>
#include <chrono>

#include "runtime/batched_kernels.h"
#include "support/clock.h"

namespace acrobat {

Graph::Graph(const analysis::Plan& plan, std::shared_ptr<const PackedIndex> packed,
             Scheduler scheduler, std::shared_ptr<ThreadPool> pool)
    : plan_(plan),
      packed_(std::move(packed)),
      share_(plan.options.share && scheduler == Scheduler::InlineDepth),
      nodes_(plan),
      outputs_(plan),
      schedule_(scheduler),
      runner_(plan, *packed_, std::move(pool)) {
  releaser_.reset(plan.ownership.enabled);
}

Graph::~Graph() { releaser_.release_all(outputs_); }

void Graph::reset(RunStats& stats, bool keep_outputs, bool by_instance) {
  stats_ = &stats;
  keep_values_ = keep_outputs;
  releaser_.release_all(outputs_);
  releaser_.reset(plan_.ownership.enabled && !keep_outputs, by_instance);
  by_instance_nodes_.clear();
  dropped_ = 0;
  nodes_.clear();
  outputs_.clear();
  gathers_.clear();
  schedule_.clear();
  flush_seconds_ = 0;
  outputs_.buffers().reset_peak();
  runner_.reset();
}

int32_t Graph::record(int32_t block, const aot::Val* in_args, int64_t instance) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const aot::Val* sizes = in_args + s.args.size();
  if (s.ragged()) nodes_.check_sizes(s, sizes);
  NodeStore::Node n = nodes_.place(block, in_args);
  const int32_t id = *nodes_.count();
  if (releaser_.by_node()) {  // before the node is added (below, either way), once no check can fail
    const auto i = static_cast<size_t>(instance);
    if (by_instance_nodes_.size() <= i) by_instance_nodes_.resize(i + 1);
    by_instance_nodes_[i].push_back(id);
    releaser_.held_from(id, plan_.ownership.owned_outputs[block]);
  }
  stats_->tensor_ops += static_cast<int64_t>(s.ops.size());
  if (!s.ragged()) stats_->flops += s.flops;  // a ragged block's are counted per instance when its batch runs
  // Ragged blocks are not shared (their FLOPs are counted per instance as their batch runs).
  if (share_ && !s.ragged()) {
    const int32_t repeated = nodes_.find_repeated(block, n.phase, n.depth, n.arg_begin, id);
    if (repeated >= 0) {
      // The host program's references to the outputs count on the first node's.
      if (releaser_.enabled()) releaser_.share(plan_.ownership.owned_outputs[block], nodes_[repeated].ref_begin);
      nodes_.add_repeat(repeated, n.arg_begin);
      stats_->shared_nodes++;
      return id;
    }
  }
  // Written into the stored node, not into `n` before it is copied: the copy's wide loads would wait
  // for those stores (a failed store forwarding, 38% of this function's cycles at H 64).
  const uint32_t size_begin = s.ragged() ? nodes_.add_sizes(s, sizes) : 0;
  const uint32_t ref_begin =
      releaser_.enabled()
          ? releaser_.add_node(plan_.ownership.owned_outputs[block], nodes_.args(n), s.args.size(), nodes_)
          : 0;
  NodeStore::Node& added = nodes_.add(n);
  added.size_begin = size_begin;
  added.ref_begin = ref_begin;
  schedule_.recorded(n.phase, n.depth, block, id);
  return id;
}

void Graph::drop_instance(int64_t instance) {
  const auto i = static_cast<size_t>(instance);
  if (!releaser_.by_node() || i >= by_instance_nodes_.size()) return;
  const int64_t dropped = releaser_.drop_unowned(by_instance_nodes_[i], nodes_, outputs_);
  std::vector<int32_t>().swap(by_instance_nodes_[i]);
  dropped_ += dropped;
  stats_->dropped_nodes += dropped;
}

void Graph::flush(BlockExecutor& exec) {
  auto t0 = Clock::now();
  double schedule_before = stats_->schedule_seconds;
  std::vector<int> kept;  // a batch's nodes but the dropped ones, once some are
  schedule_.flush(nodes_, *stats_, [&](int block, const std::vector<int>& ids) {
    if (dropped_ == 0) return run_batch(exec, block, ids);
    kept.clear();
    for (int id : ids)
      if (nodes_[id].batch != NodeStore::kDropped) kept.push_back(id);
    if (!kept.empty()) run_batch(exec, block, kept);
  });
  double total = seconds_since(t0);
  flush_seconds_ += total;
  stats_->kernel_seconds += total - (stats_->schedule_seconds - schedule_before);
}

void Graph::run_batch(BlockExecutor& exec, int block, const std::vector<int>& batch_ids) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  // Instances picking the same matrix of an indexed param next to each other (see
  // batched_matmul_grouped).
  const std::vector<int> sorted_ids =
      ordered_by_indexed_weights(s, batch_ids, [&](int id, int e) { return nodes_.arg(id, size_t(e)).data; });
  const std::vector<int>& ids = sorted_ids.empty() ? batch_ids : sorted_ids;
  const int64_t B = static_cast<int64_t>(ids.size());
  const int batch = outputs_.add(block, B);
  for (size_t r = 0; r < ids.size(); ++r) {
    nodes_[ids[r]].batch = batch;
    nodes_[ids[r]].row = static_cast<int>(r);
  }
  const auto start = Clock::now();
  runner_.run(exec, block, ids, batch, nodes_, outputs_, keep_values_);
  const double seconds = seconds_since(start);
  if (releaser_.enabled()) releaser_.batch_ran(s, ids, batch, nodes_, outputs_);

  stats_->batches++;
  const int64_t scratch_peak = runner_.fold_counters(*stats_);
  auto& counts = stats_->blocks[s.name];
  counts.nodes += B;
  counts.batches++;
  counts.seconds += seconds;
  stats_->peak_bytes = std::max<int64_t>(stats_->peak_bytes,
                                         static_cast<int64_t>(outputs_.buffers().peak_bytes()) + scratch_peak);
  if (between_batches_) between_batches_();
}

}  // namespace acrobat
