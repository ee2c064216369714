#include "autodiff/weight_products.h"

#include <algorithm>
#include <thread>

#include "acrobat/kernels.h"

namespace acrobat {

void WeightProducts::begin(std::vector<Tensor>& grads, ThreadPool* pool) {
  stop();
  ++calls_;
  grads_ = &grads;
  for (auto& w : weight_rows_) w->rows = w->ready = w->ready_rows = 0;
  for (Stream& s : streams_) s.done = 0;
  kept_.assign(grads.size(), uint8_t{0});
  failed_ = false;
  if (pool && pool->size() > 1) {
    pool_ = pool;
    pool_->attach(this);
  }
}

void WeightProducts::stop() {
  if (!pool_) return;
  pool_->detach(this);
  pool_ = nullptr;
}

WeightProducts::TransposedWeight& WeightProducts::transposed(const float* w, int K, int N) {
  TransposedWeight& t = transposed_[w];
  if (t.K != K || t.N != N) {  // new, or another matrix at the same address
    t.groups.clear();
    for (int c0 = 0; c0 < K; c0 += kDxColumns)
      t.groups.push_back(kernels::pack_transposed_weights(N, std::min(K - c0, kDxColumns), w + int64_t(c0) * N, N));
    t.K = K;
    t.N = N;
    t.call = calls_;
  }
  return t;
}

void WeightProducts::input_adjoint(const float* w, int K, int N, const float* dy, float* dx, int64_t rows,
                                   ThreadPool* pool) {
  input_adjoint_copying(w, K, N, dy, dx, rows, pool, {});
}

void WeightProducts::input_adjoint_copying(const float* w, int K, int N, const float* dy, float* dx, int64_t rows,
                                           ThreadPool* pool, std::span<const RowCopy> copies) {
  // W^T packed pays when W is weight-sized (the rule of kernels::gemm_strided's transposes).
  // Cut into blocks of kRows rows (whole 64-row blocks of the JIT kernels) by groups of kDxColumns
  // of dX's columns, the same cut at any thread count, for the pool to share.
  constexpr int64_t kRows = 256;
  if (K >= 128 && N >= 128) {
    TransposedWeight& t = transposed(w, K, N);
    const std::vector<std::shared_ptr<kernels::PackedWeights>>& groups = t.groups;
    const int64_t row_blocks = (rows + kRows - 1) / kRows;
    const int64_t num_groups = static_cast<int64_t>(groups.size());
    // W^T's groups packed again for this call (W changed in place) by the threads: within the
    // pieces that use them when there is one row block, else first.
    const bool repack = t.call != calls_;
    t.call = calls_;
    auto pack = [&](int64_t g) { groups[size_t(g)]->repack_transposed(w + g * kDxColumns * N, N); };
    if (repack && row_blocks > 1) for_each_piece(pool, num_groups, [&](int64_t g, int) { pack(g); });
    auto block = [&](int64_t i, int) {
      const int64_t r0 = (i / num_groups) * kRows, r1 = std::min(rows, r0 + kRows);
      const int64_t g = i % num_groups;
      if (repack && row_blocks == 1) pack(g);
      kernels::gemm_packed(static_cast<int>(r1 - r0), dy + r0 * N, N, *groups[size_t(g)],
                           dx + r0 * K + g * kDxColumns, K, false);
    };
    const int64_t products = row_blocks * num_groups;
    for_each_piece(pool, products + static_cast<int64_t>(copies.size()), [&](int64_t i, int t) {
      if (i < products) block(i, t);
      else copy_rows(copies[size_t(i - products)]);
    });
  } else {
    kernels::gemm_strided(false, true, static_cast<int>(rows), K, N, dy, N, w, N, dx, K, false);
    for (const RowCopy& c : copies) copy_rows(c);
  }
}

void WeightProducts::input_adjoint_keeping(int param, int64_t offset, const float* w, int K, int N, const float* x,
                                           const float* dy, float* dx, int64_t rows, ThreadPool* pool) {
  WeightRows& r = place_rows(param, offset, K, N, x, dy, rows);
  input_adjoint_copying(w, K, N, dy, dx, rows, pool, copies_);
  rows_placed(r);
}

void WeightProducts::copy_rows(const RowCopy& c) {
  std::copy_n(c.x, c.n * c.K, c.to_x);
  std::copy_n(c.dy, c.n * c.N, c.to_dy);
}

void WeightProducts::keep_rows(int param, int64_t offset, int K, int N, const float* x, const float* dy,
                               int64_t rows) {
  WeightRows& r = place_rows(param, offset, K, N, x, dy, rows);
  for (const RowCopy& c : copies_) copy_rows(c);
  rows_placed(r);
}

WeightProducts::WeightRows& WeightProducts::place_rows(int param, int64_t offset, int K, int N, const float* x,
                                                       const float* dy, int64_t rows) {
  auto it = std::find_if(weight_rows_.begin(), weight_rows_.end(), [&](const std::unique_ptr<WeightRows>& r) {
    return r->param == param && r->offset == offset && r->K == K && r->N == N;
  });
  if (it == weight_rows_.end()) {
    std::lock_guard<std::mutex> lock(mutex_);
    weight_rows_.push_back(std::make_unique<WeightRows>(WeightRows{param, offset, K, N, {}, {}, 0, 0, 0}));
    for (const Block& b : blocks(K, N)) streams_.push_back(Stream{weight_rows_.size() - 1, b});
    it = weight_rows_.end() - 1;
  }
  WeightRows& r = **it;
  kept_[size_t(param)] = 1;
  const int64_t chunks = (r.rows + rows + kChunkRows - 1) / kChunkRows;
  if (static_cast<int64_t>(r.x.size()) < chunks) {
    // Grown, never shrunk: the next call reuses the memory without zeroing it again.
    std::lock_guard<std::mutex> lock(mutex_);
    while (static_cast<int64_t>(r.x.size()) < chunks) {
      r.x.push_back(std::make_unique_for_overwrite<float[]>(size_t(kChunkRows) * K));
      r.dy.push_back(std::make_unique_for_overwrite<float[]>(size_t(kChunkRows) * N));
    }
  }
  copies_.clear();
  for (int64_t done = 0; done < rows;) {
    const int64_t c = r.rows / kChunkRows, at = r.rows % kChunkRows;
    const int64_t n = std::min({rows - done, kChunkRows - at, kCopyRows});
    copies_.push_back(RowCopy{x + done * K, dy + done * N, r.x[size_t(c)].get() + at * K,
                              r.dy[size_t(c)].get() + at * N, n, K, N});
    r.rows += n;  // no worker reads these rows before rows_placed makes their chunk ready
    done += n;
  }
  return r;
}

void WeightProducts::rows_placed(WeightRows& r) {
  if (pool_ && r.rows / kChunkRows > r.ready) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      r.ready = r.rows / kChunkRows;
      r.ready_rows = r.ready * kChunkRows;
    }
    pool_->notify();
  }
}

size_t WeightProducts::bytes() const {
  size_t held = 0;
  for (const auto& r : weight_rows_)
    held += r->x.size() * (r->K + r->N) * kChunkRows * sizeof(float);
  for (const auto& [w, t] : transposed_) held += size_t(t.K) * t.N * sizeof(float);  // panels
  return held;
}

namespace {

// dW is cut into blocks of up to kRows x kColumns, always the same whatever the threads (a block is
// the same GEMM on one thread or many). Cutting W's rows as well as its columns gives a tall matrix
// (a transformer's second feed-forward layer, [2048, 512]) four blocks instead of one, for the
// threads to share; blocks of 256 rows, which would split a [512, 512] one too, measured no faster
// on two threads and up to 10% slower on one (the encoder's training step, noisy host).
constexpr int kRows = 512;
constexpr int kColumns = 512;

}  // namespace

std::vector<WeightProducts::Block> WeightProducts::blocks(int K, int N) {
  std::vector<Block> out;
  for (int r = 0; r < K; r += kRows)
    for (int c = 0; c < N; c += kColumns) out.push_back(Block{r, std::min(K, r + kRows), c, std::min(N, c + kColumns)});
  return out;
}

void WeightProducts::gradient_block(const float* x, const float* dy, int64_t rows, int K, int N, const Block& b,
                                    float* dw) {
  kernels::gemm_strided(true, false, b.r1 - b.r0, b.c1 - b.c0, static_cast<int>(rows), x + b.r0, K, dy + b.c0, N,
                        dw + int64_t(b.r0) * N + b.c0, N, true);
}

void WeightProducts::weight_gradient(std::vector<Tensor>& grads, int param, int64_t offset, int K, int N,
                                     const float* x, const float* dy, int64_t rows, ThreadPool* pool) const {
  float* dw = grads[param].data.get() + offset;
  const std::vector<Block> cut = blocks(K, N);
  for_each_piece(pool, static_cast<int64_t>(cut.size()), [&](int64_t i, int) {
    gradient_block(x, dy, rows, K, N, cut[size_t(i)], dw);
  });
}

void WeightProducts::add_chunks(Stream& s) {
  const WeightRows& r = *weight_rows_[s.rows];
  float* const dw = (*grads_)[size_t(r.param)].data.get() + r.offset;
  for (; s.done * kChunkRows < r.rows; ++s.done)
    gradient_block(r.x[size_t(s.done)].get(), r.dy[size_t(s.done)].get(),
                   std::min(kChunkRows, r.rows - s.done * kChunkRows), r.K, r.N, s.b, dw);
}

bool WeightProducts::step(int) noexcept {
  // What the unit reads, taken under the mutex: the caller may add streams and chunks meanwhile
  // (moving the vectors that hold them, not the chunks' memory).
  size_t stream = 0;
  const float *x = nullptr, *dy = nullptr;
  float* dw = nullptr;
  int64_t rows = 0;
  int K = 0, N = 0;
  Block b{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return false;
    // The stream with the most chunks ready: the longest chain of sums that must follow each other.
    int64_t most = 0;
    for (size_t k = 0; k < streams_.size(); ++k) {
      const Stream& t = streams_[k];
      const int64_t ready = weight_rows_[t.rows]->ready;  // 0 while the caller flushes t's rows
      if (!t.busy && ready > 0 && ready - t.done > most) {
        most = ready - t.done;
        stream = k;
      }
    }
    if (most == 0) return false;
    Stream& s = streams_[stream];
    const WeightRows& r = *weight_rows_[s.rows];
    s.busy = true;
    x = r.x[size_t(s.done)].get();
    dy = r.dy[size_t(s.done)].get();
    dw = (*grads_)[size_t(r.param)].data.get() + r.offset;
    rows = std::min(kChunkRows, r.ready_rows - s.done * kChunkRows);
    K = r.K;
    N = r.N;
    b = s.b;
  }
  // A ready chunk's rows were written before `ready` was raised under the mutex; nothing else
  // writes the block of the gradient or the stream until busy is cleared.
  bool ok = true;
  try {
    gradient_block(x, dy, rows, K, N, b, dw);
  } catch (...) {
    ok = false;  // left to the caller, whose sums will meet the error again
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Stream& s = streams_[stream];
  s.busy = false;
  if (ok) ++s.done;
  else failed_ = true;
  return ok;
}

void WeightProducts::flush_overlapping(int param, int64_t offset, int64_t n, ThreadPool* pool) {
  for (size_t i = 0; i < weight_rows_.size(); ++i) {
    WeightRows& r = *weight_rows_[i];
    if (r.param != param || r.rows == 0 || r.offset >= offset + n || offset >= r.offset + int64_t(r.K) * r.N)
      continue;
    std::vector<Stream*> mine;
    for (;;) {  // no worker starts a chunk of r now; wait for those that run one
      std::unique_lock<std::mutex> lock(mutex_);
      r.ready = r.ready_rows = 0;
      mine.clear();
      bool busy = false;
      for (Stream& s : streams_)
        if (s.rows == i) {
          mine.push_back(&s);
          busy = busy || s.busy;
        }
      if (!busy) break;
      lock.unlock();
      std::this_thread::yield();
    }
    for_each_piece(pool, static_cast<int64_t>(mine.size()), [&](int64_t k, int) { add_chunks(*mine[size_t(k)]); });
    // The rows kept from here on start a new run of chunks.
    std::lock_guard<std::mutex> lock(mutex_);
    r.rows = 0;
    for (Stream* s : mine) s->done = 0;
  }
}

void WeightProducts::weight_gradients(ThreadPool* pool) {
  if (pool_) {
    // Every chunk ready, the last ones as far as their rows go: the caller takes them with the
    // workers, one at a time (a whole block's chunks as one piece left a thread idle while the
    // other finished a long one).
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& r : weight_rows_) {
        r->ready = (r->rows + kChunkRows - 1) / kChunkRows;
        r->ready_rows = r->rows;
      }
    }
    pool_->notify();
    while (step(0)) {
    }
    stop();
  }
  // The chunks no thread added yet (those after one a worker held when the caller found no more).
  std::vector<Stream*> left;
  for (Stream& s : streams_)
    if (s.done * kChunkRows < weight_rows_[s.rows]->rows) left.push_back(&s);
  for_each_piece(pool, static_cast<int64_t>(left.size()), [&](int64_t i, int) { add_chunks(*left[size_t(i)]); });
}

}  // namespace acrobat
