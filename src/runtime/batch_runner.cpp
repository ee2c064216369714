#include "runtime/batch_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "runtime/batched_kernels.h"
#include "runtime/shared_products.h"
#include "support/clock.h"

namespace acrobat {

namespace {

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

BatchRunner::BatchRunner(const analysis::Plan& plan, const PackedIndex& packed, std::shared_ptr<ThreadPool> pool)
    : plan_(plan), packed_(packed), pool_(std::move(pool)), ragged_(plan, packed) {
  const int threads = this->threads();
  scratch_ = std::vector<Arena>(static_cast<size_t>(threads));
  counters_.assign(static_cast<size_t>(threads), KernelCounters{});
}

void BatchRunner::reset() {
  for (Arena& a : scratch_) {
    a.reset();
    a.reset_peak();
  }
}

void BatchRunner::run(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch, const NodeStore& nodes,
                      BatchOutputs& outputs, bool keep_values) {
  if (plan_.blocks[block].ragged())
    run_ragged(block, ids, batch, nodes, outputs, keep_values);
  else
    run_static(exec, block, ids, batch, nodes, outputs, keep_values);
}

int64_t BatchRunner::fold_counters(RunStats& stats) {
  int64_t scratch_peak = 0;
  for (size_t t = 0; t < scratch_.size(); ++t) {
    counters_[t].fold_into(stats);
    scratch_peak += static_cast<int64_t>(scratch_[t].peak_bytes());
  }
  return scratch_peak;
}

void BatchRunner::run_static(BlockExecutor& exec, int block, const std::vector<int>& ids, int batch,
                             const NodeStore& nodes, BatchOutputs& batch_outputs, bool keep_values) {
  const analysis::StaticBlock& s = plan_.blocks[block];
  const int64_t B = static_cast<int64_t>(ids.size());
  std::vector<float*>& outputs = batch_outputs.outputs(batch);
  const analysis::KernelPlan& kp = plan_.kernels[block];
  for (size_t k = 0; k < s.ops.size(); ++k)
    if (s.ops[k].escapes || (keep_values && analysis::owns_scratch(kp, k)))
      outputs[k] = batch_outputs.buffers().alloc(static_cast<size_t>(B * s.ops[k].size));

  // Arguments: reuse ones are one tensor by construction; the others are found shared, strided in
  // place, or scattered.
  std::vector<aot::Operand> args(s.args.size());
  if (rows_.size() < args.size()) rows_.resize(args.size());
  for (size_t e = 0; e < args.size(); ++e) {
    const analysis::BlockArg& arg = s.args[e];
    if (arg.known && arg.mode == analysis::ArgMode::Reuse) {
      const float* d = batch_outputs.data(nodes, nodes.arg(ids[0], e));
      args[e] = aot::Operand{d, 0, nullptr, packed_.find(d)};
      continue;
    }
    std::vector<const float*>& r = rows_[e];
    r.resize(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) r[b] = batch_outputs.data(nodes, nodes.arg(ids[b], e));
    args[e] = classify_operand(r.data(), B, num_elements(arg.shape), packed_);
  }

  // Pieces of the batch for the threads to take (thread_pool.h): with one thread, L2-sized chunks;
  // cut for more (cut_pieces), each piece is what is left divided by the threads (guided
  // self-scheduling): the first pieces are large and the last ones small, so a thread that gets
  // fewer cycles than the others takes fewer pieces and all finish together. (Pieces of half that,
  // what is left over twice the threads, measured 2-4% slower on Tree-LSTM with two threads: more,
  // smaller GEMMs.)
  // A kernel call indexes the elements of its instances with int (the checker bounds one tensor
  // to 2^31 - 1 elements, not a batch of them): a piece never holds more.
  int64_t largest = 1;
  for (const auto& op : s.ops) largest = std::max(largest, op.size);
  for (const auto& arg : s.args) largest = std::max(largest, num_elements(arg.shape));
  const int64_t chunk =
      std::clamp<int64_t>(exec.chunk_instances(s), 1, std::max<int64_t>(1, INT32_MAX / largest));
  const bool worth = pool_ && B >= 2 && double(B) * double(s.flops) >= kMinParallelFlops;
  const bool split = cut_pieces(worth, keep_values, [&](bool by_threads) {
    const int64_t threads = by_threads ? pool_->size() : 1;
    piece_ends_.clear();
    for (int64_t b = 0; b < B;) {
      int64_t left = B - b, n = chunk;
      if (by_threads)
        n = std::min(n, std::max({(left + threads - 1) / threads, kMinPieceInstances,
                                  (B + ThreadPool::kMaxPieces - 1) / ThreadPool::kMaxPieces}));
      b += std::min(n, left);
      piece_ends_.push_back(b);
    }
  });
  run_pieces(split, keep_values, B, [&](int64_t b0, int64_t b1, int t) {
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
// operator's output (keeping values: every value the plan stores) packed instance after
// instance, the arguments as per-instance pointers, and
// pieces of about kRaggedPieceRows rows of the block's GEMMs on weights each (fewer when the
// values of that many rows would exceed kRaggedPieceFloats).
void BatchRunner::run_ragged(int block, const std::vector<int>& ids, int batch, const NodeStore& nodes,
                             BatchOutputs& outputs, bool keep_values) {
  constexpr int64_t kRaggedPieceRows = 512;
  constexpr int64_t kRaggedPieceFloats = int64_t{1} << 24;
  const analysis::StaticBlock& s = plan_.blocks[block];
  const analysis::RaggedPlan& rp = plan_.ragged[block];
  const int64_t B = static_cast<int64_t>(ids.size());
  const size_t S = s.sizes.size(), E = s.args.size(), n = s.ops.size();
  std::vector<int64_t> sizes(static_cast<size_t>(B) * S);
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(nodes.sizes(nodes[ids[b]]), S, sizes.begin() + b * S);
  std::vector<int64_t>& offsets = outputs.offsets(batch);
  offsets.assign(n * static_cast<size_t>(B + 1), 0);
  grown_.clear();
  grown_in_place_.clear();
  // Per instance: the floats of its stored values, and the rows of its GEMMs on weights.
  std::vector<int64_t> floats(static_cast<size_t>(B), 0), rows(static_cast<size_t>(B), 1);
  for (size_t k = 0; k < n; ++k) {
    int64_t* off = offsets.data() + k * (B + 1);
    const analysis::RaggedStep step = rp.ops[k].step;
    const bool stored = step != analysis::RaggedStep::View && step != analysis::RaggedStep::Alias &&
                        (step != analysis::RaggedStep::Fused || rp.ops[k].stored);
    const bool weights = step == analysis::RaggedStep::GemmShared || step == analysis::RaggedStep::GemmIndexed;
    // An output for each escaping value, and when the backward pass follows, for every value the
    // plan stores on its own (it reads them instead of computing them again).
    const bool kept = s.ops[k].escapes || (keep_values && analysis::stores_own_value(rp, k));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t elems = ragged_elements(s, k, sizes.data() + b * S);
      if (stored) floats[b] += elems;
      if (weights) rows[b] = std::max(rows[b], elems / ragged_dim(s, s.ops[k].shape.back(), sizes.data() + b * S));
      off[b + 1] = off[b] + (kept ? elems : 0);
    }
    if (!kept) continue;
    if (step == analysis::RaggedStep::Append && !keep_values) {
      // Growing storage (batch_outputs.h): each instance's value placed on its own, extending
      // the store of its first operand where it can.
      if (grown_.empty()) {
        grown_.assign(n * static_cast<size_t>(B), nullptr);
        grown_in_place_.assign(n * static_cast<size_t>(B), 0);
      }
      outputs.grow(batch, static_cast<int>(k));
      const int e = s.ops[k].operands[0].index;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t* sz = sizes.data() + b * S;
        const bool in_place = outputs.place_appended(batch, static_cast<int>(k), static_cast<int>(b), nodes,
                                                     nodes.arg(ids[b], e), ragged_elements(s, e, sz, true),
                                                     ragged_elements(s, k, sz), &grown_[k * B + b]);
        grown_in_place_[k * B + b] = in_place ? 1 : 0;
        counters_[0].appends_in_place += in_place ? 1 : 0;
      }
      continue;
    }
    outputs.output(batch, static_cast<int>(k)) = outputs.buffers().alloc(static_cast<size_t>(std::max<int64_t>(1, off[B])));
  }
  std::vector<const float*> args(E * static_cast<size_t>(B));
  for (size_t e = 0; e < E; ++e)
    for (int64_t b = 0; b < B; ++b) args[e * B + b] = outputs.data(nodes, nodes.arg(ids[b], e));

  int64_t total_rows = 0, total_floats = 0;
  for (int64_t b = 0; b < B; ++b) {
    total_rows += rows[b];
    total_floats += floats[b];
  }
  const bool worth = pool_ && B >= 2 && double(total_floats) * 8 >= kMinParallelFlops;
  const bool split = cut_pieces(worth, keep_values, [&](bool by_threads) {
    const int64_t threads = by_threads ? pool_->size() : 1;
    piece_ends_.clear();
    int64_t left = total_rows;
    for (int64_t b = 0; b < B;) {
      const int64_t target = by_threads ? std::min(kRaggedPieceRows, std::max<int64_t>(1, left / threads))
                                        : kRaggedPieceRows;
      int64_t taken = 0, taken_floats = 0;
      do {
        taken += rows[b];
        taken_floats += floats[b++];
      } while (b < B && taken < target && taken_floats + floats[b] <= kRaggedPieceFloats);
      left -= taken;
      piece_ends_.push_back(b);
    }
  });
  run_pieces(split, keep_values, B, [&](int64_t b0, int64_t b1, int t) {
    std::vector<float*> outs(n, nullptr);
    for (size_t k = 0; k < n; ++k)
      if (float* o = outputs.output(batch, static_cast<int>(k))) outs[k] = o + offsets[k * (B + 1) + b0];
    ragged_.run(RaggedCall{&s, b1 - b0, sizes.data() + b0 * S, args.data() + b0, B, outs.data(),
                           grown_.empty() ? nullptr : grown_.data() + b0,
                           grown_in_place_.empty() ? nullptr : grown_in_place_.data() + b0, B,
                           &scratch_[t], &counters_[t]});
  });
}

template <class Cut>
bool BatchRunner::cut_pieces(bool worth, bool keep_values, Cut&& cut) {
  // A forward kept for reverse mode is cut as on one thread, whatever the threads: the same GEMMs,
  // so a gradient has the same bits on any number of threads.
  const bool by_threads = worth && !keep_values;
  cut(by_threads);
  if (!worth || piece_ends_.size() == 1) return false;
  if (split_guard_.split()) return true;
  if (by_threads) cut(false);
  return false;
}

template <class Body>
void BatchRunner::run_pieces(bool split, bool keep_values, int64_t B, Body&& body) {
  if (piece_ends_.size() == 1) {
    // One piece: no pool call. Kept for reverse mode, the threads share its products by weights
    // instead, cut by W's columns (shared_products.h), which changes no bit.
    ShareProducts share(keep_values ? pool_.get() : nullptr);
    scratch_[0].reset();
    body(0, B, 0);
    return;
  }
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

}  // namespace acrobat
