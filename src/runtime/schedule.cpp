#include "runtime/schedule.h"

#include <algorithm>
#include <chrono>

#include "runtime/node_store.h"
#include "support/diagnostics.h"
#include "support/clock.h"

namespace acrobat {

const char* scheduler_name(Scheduler s) {
  switch (s) {
    case Scheduler::InlineDepth: return "inline-depth";
    case Scheduler::Depth: return "depth";
    case Scheduler::Agenda: return "agenda";
  }
  return "?";
}

Scheduler parse_scheduler(const std::string& name) {
  for (Scheduler s : {Scheduler::InlineDepth, Scheduler::Depth, Scheduler::Agenda})
    if (name == scheduler_name(s)) return s;
  throw UserError("unknown scheduler '" + name + "' (expected inline-depth, depth or agenda)");
}

void Schedule::flush(const NodeStore& nodes, RunStats& stats, FunctionRef<void(int, const std::vector<int>&)> run) {
  switch (scheduler_) {
    case Scheduler::InlineDepth:
      if (demanded_.empty()) {
        run_all(buckets_, run);
      } else {
        auto inputs = [&](int n, auto&& f) { nodes.pending_inputs(n, f); };
        run_demanded(buckets_, demanded_, nodes.size(), marks_, stamp_, inputs, run);
      }
      break;
    case Scheduler::Depth: run_by_traversal_depth(nodes, stats, run); break;
    case Scheduler::Agenda: run_agenda(nodes, stats, run); break;
  }
  demanded_.clear();
  if (scheduler_ != Scheduler::InlineDepth) first_pending_ = nodes.size();
}

// Depth of each pending node from a pass over the graph (DyNet's depth computation): nodes are
// recorded after the nodes they read, so one pass in recording order suffices.
std::vector<int> Schedule::traversal_depths(const NodeStore& nodes) const {
  std::vector<int> depth(nodes.size() - first_pending_, 0);
  for (size_t i = first_pending_; i < nodes.size(); ++i) {
    int d = 0;
    nodes.pending_inputs(static_cast<int>(i), [&](int m) { d = std::max(d, depth[m - first_pending_]); });
    depth[i - first_pending_] = d + 1;
  }
  return depth;
}

void Schedule::run_by_traversal_depth(const NodeStore& nodes, RunStats& stats,
                                      FunctionRef<void(int, const std::vector<int>&)> run) {
  auto t0 = Clock::now();
  std::vector<int> depth = traversal_depths(nodes);
  std::vector<std::vector<std::vector<int>>> buckets;  // [depth][block]
  for (size_t i = first_pending_; i < nodes.size(); ++i) {
    int d = depth[i - first_pending_];
    int s = nodes[static_cast<int32_t>(i)].block;
    if (buckets.size() <= static_cast<size_t>(d)) buckets.resize(d + 1);
    if (buckets[d].size() <= static_cast<size_t>(s)) buckets[d].resize(s + 1);
    buckets[d][s].push_back(static_cast<int>(i));
  }
  stats.schedule_seconds += seconds_since(t0);
  for (const auto& row : buckets)
    for (size_t s = 0; s < row.size(); ++s)
      if (!row[s].empty()) run(static_cast<int>(s), row[s]);
}

void Schedule::run_agenda(const NodeStore& nodes, RunStats& stats,
                          FunctionRef<void(int, const std::vector<int>&)> run) {
  auto t0 = Clock::now();
  size_t first = first_pending_, count = nodes.size() - first;
  std::vector<int> depth = traversal_depths(nodes);
  std::vector<int> waiting(count, 0);
  std::vector<std::vector<int>> dependents(count);
  for (size_t i = 0; i < count; ++i)
    nodes.pending_inputs(static_cast<int>(first + i), [&](int m) {
      dependents[m - first].push_back(static_cast<int>(i));
      waiting[i]++;
    });
  std::vector<std::vector<int>> ready(nodes.plan().blocks.size());
  for (size_t i = 0; i < count; ++i)
    if (waiting[i] == 0) ready[nodes[static_cast<int32_t>(first + i)].block].push_back(static_cast<int>(first + i));
  stats.schedule_seconds += seconds_since(t0);
  for (;;) {
    auto t1 = Clock::now();
    int best = -1;
    double best_depth = 0;
    for (size_t s = 0; s < ready.size(); ++s) {
      if (ready[s].empty()) continue;
      double sum = 0;
      for (int id : ready[s]) sum += depth[id - first];
      double avg = sum / static_cast<double>(ready[s].size());
      if (best < 0 || avg < best_depth) {
        best = static_cast<int>(s);
        best_depth = avg;
      }
    }
    if (best < 0) break;
    std::vector<int> batch;
    batch.swap(ready[best]);
    stats.schedule_seconds += seconds_since(t1);
    run(best, batch);
    auto t2 = Clock::now();
    for (int id : batch)
      for (int dep : dependents[id - first])
        if (--waiting[dep] == 0) ready[nodes[static_cast<int32_t>(first + dep)].block].push_back(static_cast<int>(first + dep));
    stats.schedule_seconds += seconds_since(t2);
  }
}

}  // namespace acrobat
