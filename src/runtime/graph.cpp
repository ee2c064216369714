#include "runtime/graph.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "runtime/batched_kernels.h"
#include "support/sizes.h"

namespace acrobat {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A batch is split across threads only when it has at least this much work: below it, waking the
// workers costs more than they save.
constexpr double kMinParallelFlops = 4e6;
// The smallest piece of a batch split across threads, in instances: below it, a GEMM on shared
// weights streams the weights for too few rows.
constexpr int64_t kMinPieceInstances = 8;

}  // namespace

bool SplitGuard::split() {
  if (serial_left_ == 0) return true;
  --serial_left_;
  return false;
}

void SplitGuard::record(double wall, double alone, bool measured) {
  if (!measured) return;
  saved_ += kMustSave * alone - wall;
  if (++batches_ < kRound) return;
  if (saved_ > 0) {
    backoff_ = kBackoff;
  } else {
    serial_left_ = backoff_;
    backoff_ = std::min(2 * backoff_, kMaxBackoff);
  }
  saved_ = 0;
  batches_ = 0;
}

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

// Instances per kernel call. A block whose intermediate values are large per instance (a
// transformer layer: 64 x 1024 floats after the first feed-forward GEMM; MV-RNN's phrase
// matrices) runs its batch in chunks whose intermediates stay in L2, as one instance's do in the
// reference engine. A chunk still gives the block's main GEMMs on shared weights the 64 rows at
// which they run at full speed (kernels' row blocks), so one-row cells (Tree-LSTM, RNNs) keep
// their batches whole. Measured on BERxiT small and MV-RNN H=64, batch 64, against no chunks
// (three interleaved pairs each): +14-41% and +19-47% at 512 KiB, within noise of 256 KiB and
// 1 MiB.
static constexpr int64_t kChunkFloats = int64_t{1} << 17;  // 512 KiB
static constexpr int64_t kGemmRows = 64;
int64_t BlockExecutor::chunk_instances(const analysis::StaticBlock& s) const {
  int64_t per_instance = 0, rows = kGemmRows;
  for (const auto& op : s.ops) {
    if (!op.view && !op.fused) per_instance += op.size;
    bool shared_weight = op.rhs->op == OpId::MatMul && !op.operands[1].local &&
                         s.args[op.operands[1].index].mode != analysis::ArgMode::Scatter;
    if (shared_weight && 4 * op.rhs->flops >= s.flops) rows = std::min(rows, op.shape[0]);
  }
  int64_t by_cache = kChunkFloats / std::max<int64_t>(1, per_instance);
  int64_t by_rows = (kGemmRows + rows - 1) / rows;
  return std::max<int64_t>({1, by_cache, by_rows});
}

Graph::Graph(const analysis::Plan& plan, std::shared_ptr<const PackedIndex> packed,
             Scheduler scheduler, std::shared_ptr<ThreadPool> pool)
    : plan_(plan),
      scheduler_(scheduler),
      packed_(std::move(packed)),
      pool_(std::move(pool)),
      release_(plan.ownership.enabled),
      share_(plan.options.share && scheduler == Scheduler::InlineDepth),
      ragged_(plan, *packed_) {
  const int threads = this->threads();
  scratch_ = std::vector<Arena>(static_cast<size_t>(threads));
  counters_.assign(static_cast<size_t>(threads), KernelCounters{});
  const char* poison = std::getenv("ACROBAT_POISON_RELEASED");
  poison_ = poison && std::string(poison) == "1";
}

Graph::~Graph() { release_all(); }

size_t Graph::output_floats(int batch, int slot) const {
  const std::vector<int64_t>& offsets = batch_offsets_[batch];
  const int64_t B = batch_sizes_[batch];
  if (!offsets.empty()) return static_cast<size_t>(std::max<int64_t>(1, offsets[slot * (B + 1) + B]));
  return static_cast<size_t>(B * plan_.blocks[batch_blocks_[batch]].ops[slot].size);
}

void Graph::release_all() {
  for (size_t b = 0; b < batch_outputs_.size(); ++b)
    for (size_t k = 0; k < batch_outputs_[b].size(); ++k)
      if (float* p = batch_outputs_[b][k]) {
        buffers_.release(p, output_floats(static_cast<int>(b), static_cast<int>(k)));
        batch_outputs_[b][k] = nullptr;
      }
  for (auto [p, n] : poisoned_) buffers_.release(p, n);
  poisoned_.clear();
}

void Graph::reset(RunStats& stats, bool keep_outputs) {
  stats_ = &stats;
  release_ = plan_.ownership.enabled && !keep_outputs;
  keep_values_ = keep_outputs;
  release_all();
  nodes_.clear();
  args_.clear();
  batch_outputs_.clear();
  batch_sizes_.clear();
  batch_blocks_.clear();
  batch_offsets_.clear();
  sizes_.clear();
  gathers_.clear();
  gather_rows_.clear();
  refs_.clear();
  live_rows_.clear();
  buckets_.clear();
  demanded_.clear();
  repeatable_.clear();
  num_nodes_ = 0;
  first_pending_ = 0;
  flush_seconds_ = 0;
  buffers_.reset_peak();
  for (Arena& a : scratch_) {
    a.reset();
    a.reset_peak();
  }
}

int32_t Graph::record(int32_t block, const aot::Val* in_args) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const aot::Val* sizes = in_args + s.args.size();
  if (s.ragged()) check_sizes(s, sizes);
  // The arguments as stored: a shared node's output as the output of the node it repeats.
  const auto arg_begin = static_cast<uint32_t>(args_.size());
  args_.insert(args_.end(), in_args, in_args + s.args.size());
  aot::Val* args = &args_[arg_begin];
  Placement place;
  for (size_t a = 0; a < s.args.size(); ++a) {
    aot::Val& v = args[a];
    if (v.node < 0) continue;
    v.node = first(v.node);
    const Node& in = nodes_[v.node];
    if (in.batch < 0)
      place.add_input(in.phase, in.depth, v.phase_ends, v.lazy.ghost);
    else
      place.add_computed_input(in.phase, v.phase_ends, v.lazy.ghost);
  }
  Node n{block, place.phase, place.node_depth(), arg_begin};
  const int32_t id = num_nodes_;
  stats_->tensor_ops += static_cast<int64_t>(s.ops.size());
  if (!s.ragged()) stats_->flops += s.flops;  // a ragged block's are counted per instance when its batch runs
  // Ragged blocks are not shared (their FLOPs are counted per instance as their batch runs).
  if (share_ && !s.ragged()) {
    const int32_t repeated = find_repeated(block, n.phase, n.depth, arg_begin, id);
    if (repeated >= 0) {
      // The host program's references to the outputs count on the first node's.
      const Node& r = nodes_[repeated];
      args_.resize(arg_begin);
      if (release_) {
        const std::vector<uint8_t>& owned = plan_.ownership.owned_outputs[block];
        for (size_t k = 0; k < owned.size(); ++k) refs_[r.ref_begin + k] += owned[k];
      }
      Node shared = r;
      shared.repeats = repeated;
      nodes_.push_back(shared);
      stats_->shared_nodes++;
      num_nodes_ = id + 1;
      return id;
    }
  }
  if (s.ragged()) {
    n.size_begin = static_cast<uint32_t>(sizes_.size());
    for (size_t z = 0; z < s.sizes.size(); ++z) sizes_.push_back(sizes[z].i);
  }
  if (release_) {
    // The node reads its lazy arguments until its batch has run; the host program owns what the
    // ownership analysis says it does.
    for (size_t a = 0; a < s.args.size(); ++a) {
      if (args[a].node < 0) continue;
      int32_t& count = refs_[nodes_[args[a].node].ref_begin + args[a].lazy.slot];
      ACROBAT_ASSERT(count > 0, "a static block reads a tensor nothing owns");
      ++count;
    }
    n.ref_begin = static_cast<uint32_t>(refs_.size());
    const std::vector<uint8_t>& owned = plan_.ownership.owned_outputs[block];
    refs_.insert(refs_.end(), owned.begin(), owned.end());
  }
  nodes_.push_back(n);
  if (scheduler_ == Scheduler::InlineDepth) add_to_bucket(buckets_, n.phase, n.depth, block, id);
  num_nodes_ = id + 1;
  return id;
}

int32_t Graph::find_repeated(int32_t block, int phase, int depth, uint32_t arg_begin, int32_t id) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const aot::Val* args = &args_[arg_begin];
  // A lazy argument is the same tensor when it is the same output of the same node; any other
  // when it is the same tensor (`data`).
  auto bits = [](const aot::Val& v) -> uint64_t {
    return v.node >= 0 ? (uint64_t(uint32_t(v.node)) << 32 | uint32_t(v.lazy.slot)) : uint64_t(v.i);
  };
  uint64_t h = (uint64_t(uint32_t(block)) << 40) ^ (uint64_t(uint32_t(phase)) << 20) ^ uint64_t(uint32_t(depth));
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 0x9E3779B97F4A7C15ull; h ^= h >> 29; };
  for (size_t a = 0; a < s.args.size(); ++a) mix(bits(args[a]) ^ (args[a].node >= 0 ? 0x5555 : 0));
  auto [it, fresh] = repeatable_.try_emplace(h, id);
  if (fresh) return -1;
  const int32_t c = it->second;
  const Node& r = nodes_[c];
  bool same = r.block == block && r.batch < 0 && r.phase == phase && r.depth == depth;
  for (size_t a = 0; same && a < s.args.size(); ++a) {
    const aot::Val& x = args_[r.arg_begin + a];
    same = x.node == args[a].node && bits(x) == bits(args[a]);
  }
  if (same) return c;
  it->second = id;  // a hash collision or a node that has run: this one from now on
  return -1;
}

void Graph::check_sizes(const analysis::StaticBlock& s, const aot::Val* sizes) const {
  const size_t S = s.sizes.size();
  int64_t values[16];
  std::vector<int64_t> many;
  int64_t* v = values;
  if (S > std::size(values)) {
    many.resize(S);
    v = many.data();
  }
  for (size_t z = 0; z < S; ++z) v[z] = sizes[z].i;
  // The shape rule of operator `op` on this instance's shapes: its message, as the reference
  // engine gives it.
  auto fail = [&](const analysis::BlockOp& op) {
    SizeNamesScope names(plan_.size_names);
    std::string named;
    for (const ir::SizeArg& a : op.rhs->sizes)
      named += (named.empty() ? "" : ", ") + dim_str(a.dim) + " = " +
               std::to_string(size_value(a.dim, s.sizes.data(), v, S));
    std::vector<std::vector<int64_t>> in;
    for (const analysis::BlockOperand& o : op.operands)
      in.push_back(bind_sizes(o.local ? s.ops[o.index].shape : s.args[o.index].shape, s.sizes.data(), v, S));
    throw UserError(op.rhs->span.begin,
                    instance_shape_error(op.rhs->op, in, bind_attr_sizes(op.rhs->attrs, s.sizes.data(), v, S), named));
  };
  for (const analysis::SizeCheck& c : plan_.ragged[s.id].checks)
    if (size_value(c.small, s.sizes.data(), v, S) > size_value(c.large, s.sizes.data(), v, S)) fail(s.ops[c.op]);
  // No value may hold more elements than a tensor may (the checker bounds the fixed shapes).
  for (const analysis::BlockOp& op : s.ops) {
    if (op.size > 0) continue;
    int64_t n = 1;
    for (int64_t d : op.shape)
      if (__builtin_mul_overflow(n, size_value(d, s.sizes.data(), v, S), &n)) n = INT64_MAX;
    if (n > kMaxTensorElements) fail(op);
  }
}

template <class F>
void Graph::pending_inputs(int n, F&& f) const {
  const Node& node = nodes_[n];
  size_t count = plan_.blocks[node.block].args.size();
  for (size_t a = 0; a < count; ++a) {
    const aot::Val& v = args_[node.arg_begin + a];
    if (v.node >= 0 && nodes_[v.node].batch < 0) f(static_cast<int>(v.node));
  }
}

void Graph::flush(BlockExecutor& exec) {
  auto t0 = Clock::now();
  double schedule_before = stats_->schedule_seconds;
  auto run = [&](int block, const std::vector<int>& ids) { run_batch(exec, block, ids); };
  switch (scheduler_) {
    case Scheduler::InlineDepth:
      if (demanded_.empty()) {
        run_all(buckets_, run);
      } else {
        auto inputs = [&](int n, auto&& f) { pending_inputs(n, f); };
        run_demanded(buckets_, demanded_, nodes_.size(), marks_, stamp_, inputs, run);
      }
      break;
    case Scheduler::Depth: run_by_traversal_depth(exec); break;
    case Scheduler::Agenda: run_agenda(exec); break;
  }
  demanded_.clear();
  if (scheduler_ != Scheduler::InlineDepth) first_pending_ = nodes_.size();
  double total = seconds_since(t0);
  flush_seconds_ += total;
  stats_->kernel_seconds += total - (stats_->schedule_seconds - schedule_before);
}

// Depth of each pending node from a pass over the graph (DyNet's depth computation): nodes are
// recorded after the nodes they read, so one pass in recording order suffices.
std::vector<int> Graph::traversal_depths() const {
  std::vector<int> depth(nodes_.size() - first_pending_, 0);
  for (size_t i = first_pending_; i < nodes_.size(); ++i) {
    int d = 0;
    pending_inputs(static_cast<int>(i), [&](int m) { d = std::max(d, depth[m - first_pending_]); });
    depth[i - first_pending_] = d + 1;
  }
  return depth;
}

void Graph::run_by_traversal_depth(BlockExecutor& exec) {
  auto t0 = Clock::now();
  std::vector<int> depth = traversal_depths();
  std::vector<std::vector<std::vector<int>>> buckets;  // [depth][block]
  for (size_t i = first_pending_; i < nodes_.size(); ++i) {
    int d = depth[i - first_pending_];
    int s = nodes_[i].block;
    if (buckets.size() <= static_cast<size_t>(d)) buckets.resize(d + 1);
    if (buckets[d].size() <= static_cast<size_t>(s)) buckets[d].resize(s + 1);
    buckets[d][s].push_back(static_cast<int>(i));
  }
  stats_->schedule_seconds += seconds_since(t0);
  for (const auto& row : buckets)
    for (size_t s = 0; s < row.size(); ++s)
      if (!row[s].empty()) run_batch(exec, static_cast<int>(s), row[s]);
}

void Graph::run_agenda(BlockExecutor& exec) {
  auto t0 = Clock::now();
  size_t first = first_pending_, count = nodes_.size() - first;
  std::vector<int> depth = traversal_depths();
  std::vector<int> waiting(count, 0);
  std::vector<std::vector<int>> dependents(count);
  for (size_t i = 0; i < count; ++i)
    pending_inputs(static_cast<int>(first + i), [&](int m) {
      dependents[m - first].push_back(static_cast<int>(i));
      waiting[i]++;
    });
  std::vector<std::vector<int>> ready(plan_.blocks.size());
  for (size_t i = 0; i < count; ++i)
    if (waiting[i] == 0) ready[nodes_[first + i].block].push_back(static_cast<int>(first + i));
  stats_->schedule_seconds += seconds_since(t0);
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
    stats_->schedule_seconds += seconds_since(t1);
    run_batch(exec, best, batch);
    auto t2 = Clock::now();
    for (int id : batch)
      for (int dep : dependents[id - first])
        if (--waiting[dep] == 0) ready[nodes_[first + dep].block].push_back(static_cast<int>(first + dep));
    stats_->schedule_seconds += seconds_since(t2);
  }
}

void Graph::run_batch(BlockExecutor& exec, int block, const std::vector<int>& batch_ids) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  // Instances picking the same matrix of an indexed param next to each other (see
  // batched_matmul_grouped).
  const std::vector<int> sorted_ids = ordered_by_indexed_weights(
      s, batch_ids, [&](int id, int e) { return args_[nodes_[id].arg_begin + e].data; });
  const std::vector<int>& ids = sorted_ids.empty() ? batch_ids : sorted_ids;
  const int64_t B = static_cast<int64_t>(ids.size());
  const int batch = static_cast<int>(batch_outputs_.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    nodes_[ids[r]].batch = batch;
    nodes_[ids[r]].row = static_cast<int>(r);
  }
  batch_outputs_.emplace_back(s.ops.size(), nullptr);
  batch_sizes_.push_back(B);
  batch_blocks_.push_back(block);
  batch_offsets_.emplace_back();
  if (s.ragged())
    run_ragged_batch(block, ids, batch);
  else
    run_static_batch(exec, block, ids, batch);
  finish_batch(block, ids, batch);
}

void Graph::run_static_batch(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const int64_t B = static_cast<int64_t>(ids.size());
  std::vector<float*>& outputs = batch_outputs_[batch];
  const analysis::KernelPlan& kp = plan_.kernels[block];
  for (size_t k = 0; k < s.ops.size(); ++k)
    if (s.ops[k].escapes || (keep_values_ && analysis::owns_scratch(kp, k)))
      outputs[k] = buffers_.alloc(static_cast<size_t>(B * s.ops[k].size));

  // Arguments: reuse ones are one tensor by construction; the others are found shared, strided in
  // place, or scattered.
  std::vector<aot::Operand> args(s.args.size());
  if (rows_.size() < args.size()) rows_.resize(args.size());
  for (size_t e = 0; e < args.size(); ++e) {
    const analysis::BlockArg& arg = s.args[e];
    if (arg.known && arg.mode == analysis::ArgMode::Reuse) {
      const float* d = data(args_[nodes_[ids[0]].arg_begin + e]);
      args[e] = aot::Operand{d, 0, nullptr, packed_->find(d)};
      continue;
    }
    std::vector<const float*>& r = rows_[e];
    r.resize(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) r[b] = data(args_[nodes_[ids[b]].arg_begin + e]);
    args[e] = classify_operand(r.data(), B, num_elements(arg.shape), *packed_);
  }

  // Pieces of the batch for the threads to take (thread_pool.h): with one thread, L2-sized chunks;
  // with more, each piece is what is left divided by the threads (guided self-scheduling): the
  // first pieces are large and the last ones small, so a thread that gets fewer cycles than the
  // others takes fewer pieces and all finish together. (Pieces of half that, what is left over
  // twice the threads, measured 2-4% slower on Tree-LSTM with two threads: more, smaller GEMMs.)
  // A kernel call indexes the elements of its instances with int (the checker bounds one tensor
  // to 2^31 - 1 elements, not a batch of them): a piece never holds more.
  int64_t largest = 1;
  for (const auto& op : s.ops) largest = std::max(largest, op.size);
  for (const auto& arg : s.args) largest = std::max(largest, num_elements(arg.shape));
  const int64_t chunk =
      std::clamp<int64_t>(exec.chunk_instances(s), 1, std::max<int64_t>(1, INT32_MAX / largest));
  const bool split = pool_ && B >= 2 && double(B) * double(s.flops) >= kMinParallelFlops &&
                     split_guard_.split();
  const int64_t threads = split ? pool_->size() : 1;
  piece_ends_.clear();
  for (int64_t b = 0; b < B;) {
    int64_t left = B - b, n = chunk;
    if (split)
      n = std::min(n, std::max({(left + threads - 1) / threads, kMinPieceInstances,
                                (B + ThreadPool::kMaxPieces - 1) / ThreadPool::kMaxPieces}));
    b += std::min(n, left);
    piece_ends_.push_back(b);
  }
  run_pieces(split, B, [&](int64_t b0, int64_t b1, int t) {
    std::vector<aot::Operand> part(args);
    std::vector<float*> outs(outputs);
    if (b0 > 0) {
      for (auto& a : part) a = slice_operand(a, b0);
      for (size_t k = 0; k < outs.size(); ++k)
        if (outs[k]) outs[k] += b0 * s.ops[k].size;
    }
    exec.run(BatchCall{&s, b1 - b0, part.data(), outs.data(), t, &scratch_[t], &counters_[t].kernel_calls});
  });
}

// A ragged block's batch (runtime/ragged_blocks.h): its instances' sizes, every escaping
// operator's output packed instance after instance, the arguments as per-instance pointers, and
// pieces of about kRaggedPieceRows rows of the block's GEMMs on weights each (fewer when the
// values of that many rows would exceed kRaggedPieceFloats).
void Graph::run_ragged_batch(int block, const std::vector<int>& ids, int batch) {
  constexpr int64_t kRaggedPieceRows = 512;
  constexpr int64_t kRaggedPieceFloats = int64_t{1} << 24;
  const analysis::StaticBlock& s = plan_.blocks[block];
  const analysis::RaggedPlan& rp = plan_.ragged[block];
  const int64_t B = static_cast<int64_t>(ids.size());
  const size_t S = s.sizes.size(), E = s.args.size(), n = s.ops.size();
  std::vector<int64_t> sizes(static_cast<size_t>(B) * S);
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(sizes_.begin() + nodes_[ids[b]].size_begin, S, sizes.begin() + b * S);
  std::vector<int64_t>& offsets = batch_offsets_[batch];
  offsets.assign(n * static_cast<size_t>(B + 1), 0);
  // Per instance: the floats of its stored values, and the rows of its GEMMs on weights.
  std::vector<int64_t> floats(static_cast<size_t>(B), 0), rows(static_cast<size_t>(B), 1);
  for (size_t k = 0; k < n; ++k) {
    int64_t* off = offsets.data() + k * (B + 1);
    const analysis::RaggedStep step = rp.ops[k].step;
    const bool stored = step != analysis::RaggedStep::View && step != analysis::RaggedStep::Alias &&
                        (step != analysis::RaggedStep::Fused || rp.ops[k].stored);
    const bool weights = step == analysis::RaggedStep::GemmShared || step == analysis::RaggedStep::GemmIndexed;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t elems = ragged_elements(s, k, sizes.data() + b * S);
      if (stored) floats[b] += elems;
      if (weights) rows[b] = std::max(rows[b], elems / ragged_dim(s, s.ops[k].shape.back(), sizes.data() + b * S));
      off[b + 1] = off[b] + (s.ops[k].escapes ? elems : 0);
    }
    if (s.ops[k].escapes)
      batch_outputs_[batch][k] = buffers_.alloc(static_cast<size_t>(std::max<int64_t>(1, off[B])));
  }
  std::vector<const float*> args(E * static_cast<size_t>(B));
  for (size_t e = 0; e < E; ++e)
    for (int64_t b = 0; b < B; ++b) args[e * B + b] = data(args_[nodes_[ids[b]].arg_begin + e]);

  int64_t total_rows = 0, total_floats = 0;
  for (int64_t b = 0; b < B; ++b) {
    total_rows += rows[b];
    total_floats += floats[b];
  }
  const bool split = pool_ && B >= 2 && double(total_floats) * 8 >= kMinParallelFlops && split_guard_.split();
  const int64_t threads = split ? pool_->size() : 1;
  piece_ends_.clear();
  int64_t left = total_rows;
  for (int64_t b = 0; b < B;) {
    const int64_t target = split ? std::min(kRaggedPieceRows, std::max<int64_t>(1, left / threads))
                                 : kRaggedPieceRows;
    int64_t taken = 0, taken_floats = 0;
    do {
      taken += rows[b];
      taken_floats += floats[b++];
    } while (b < B && taken < target && taken_floats + floats[b] <= kRaggedPieceFloats);
    left -= taken;
    piece_ends_.push_back(b);
  }
  run_pieces(split, B, [&](int64_t b0, int64_t b1, int t) {
    std::vector<float*> outs(n, nullptr);
    for (size_t k = 0; k < n; ++k)
      if (float* o = batch_outputs_[batch][k]) outs[k] = o + offsets[k * (B + 1) + b0];
    ragged_.run(RaggedCall{&s, b1 - b0, sizes.data() + b0 * S, args.data() + b0, B, outs.data(),
                           &scratch_[t], &counters_[t]});
  });
}

template <class Body>
void Graph::run_pieces(bool split, int64_t B, Body&& body) {
  double caller_seconds = 0;
  int64_t caller_instances = 0;
  auto run_piece = [&](int64_t piece, int t) {
    const int64_t b0 = piece == 0 ? 0 : piece_ends_[piece - 1], b1 = piece_ends_[piece];
    const Clock::time_point start = split && t == 0 ? Clock::now() : Clock::time_point{};
    scratch_[t].reset();
    body(b0, b1, t);
    if (split && t == 0) {
      caller_seconds += seconds_since(start);
      caller_instances += b1 - b0;
    }
  };
  const int64_t pieces = static_cast<int64_t>(piece_ends_.size());
  if (!split) {
    for (int64_t p = 0; p < pieces; ++p) run_piece(p, 0);
  } else {
    const Clock::time_point start = Clock::now();
    pool_->run(pieces, run_piece);
    split_guard_.record(seconds_since(start),
                        caller_seconds * double(B) / double(std::max<int64_t>(1, caller_instances)),
                        caller_instances > 0);
  }
}

void Graph::finish_batch(int block, const std::vector<int>& ids, int batch) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const int64_t B = static_cast<int64_t>(ids.size());
  std::vector<float*>& outputs = batch_outputs_[batch];
  if (release_) {
    // Outputs nothing owns any more go back at once (read by no later node and no host value),
    // then the batch's own references to its inputs.
    std::vector<int32_t>& live = live_rows_.emplace_back(s.ops.size(), 0);
    for (size_t k = 0; k < s.ops.size(); ++k) {
      if (!outputs[k]) continue;
      for (int id : ids) live[k] += refs_[nodes_[id].ref_begin + k] > 0 ? 1 : 0;
      if (live[k] == 0) release_output(batch, static_cast<int>(k));
    }
    for (int id : ids) {
      const aot::Val* a = &args_[nodes_[id].arg_begin];
      for (size_t e = 0; e < s.args.size(); ++e)
        if (a[e].node >= 0) unref(a[e].node, a[e].lazy.slot);
    }
  }

  stats_->batches++;
  int64_t scratch_peak = 0;
  for (size_t t = 0; t < scratch_.size(); ++t) {
    counters_[t].fold_into(*stats_);
    scratch_peak += static_cast<int64_t>(scratch_[t].peak_bytes());
  }
  auto& counts = stats_->blocks[s.name];
  counts.nodes += B;
  counts.batches++;
  stats_->peak_bytes =
      std::max<int64_t>(stats_->peak_bytes, static_cast<int64_t>(buffers_.peak_bytes()) + scratch_peak);
}

void Graph::row_released(int batch, int slot) {
  if (--live_rows_[batch][slot] == 0) release_output(batch, slot);
}

void Graph::release_output(int batch, int slot) {
  float*& p = batch_outputs_[batch][slot];
  const size_t n = output_floats(batch, slot);
  if (poison_) {
    std::fill(p, p + n, std::numeric_limits<float>::quiet_NaN());
    poisoned_.emplace_back(p, n);
  } else {
    buffers_.release(p, n);
  }
  p = nullptr;
}

std::vector<std::vector<int>> ForwardRecord::nodes_by_row() const {
  std::vector<std::vector<int>> members(num_batches());
  for (size_t b = 0; b < members.size(); ++b) members[b].assign(static_cast<size_t>(g_.batch_sizes_[b]), -1);
  for (int32_t id = 0; id < g_.num_nodes_; ++id) {
    const Graph::Node& n = g_.nodes_[id];
    if (n.repeats >= 0) continue;
    ACROBAT_ASSERT(n.batch >= 0, "backward over a graph with pending nodes");
    members[n.batch][n.row] = id;
  }
  return members;
}

}  // namespace acrobat
