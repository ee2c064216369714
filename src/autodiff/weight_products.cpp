#include "autodiff/weight_products.h"

#include <algorithm>

namespace acrobat {

void WeightProducts::begin() {
  ++calls_;
  for (WeightRows& w : weight_rows_) w.rows = 0;
}

const std::vector<std::shared_ptr<kernels::PackedWeights>>& WeightProducts::transposed(const float* w, int K,
                                                                                       int N) {
  TransposedWeight& t = transposed_[w];
  if (t.K != K || t.N != N) {  // new, or another matrix at the same address
    t.groups.clear();
    for (int c0 = 0; c0 < K; c0 += kDxColumns)
      t.groups.push_back(kernels::pack_transposed_weights(N, std::min(K - c0, kDxColumns), w + int64_t(c0) * N, N));
    t.K = K;
    t.N = N;
  } else if (t.call != calls_) {
    for (size_t g = 0; g < t.groups.size(); ++g) t.groups[g]->repack_transposed(w + int64_t(g) * kDxColumns * N, N);
  }
  t.call = calls_;
  return t.groups;
}

void WeightProducts::input_adjoint(const float* w, int K, int N, const float* dy, float* dx, int64_t rows,
                                   ThreadPool* pool) {
  // W^T packed pays when W is weight-sized (the rule of kernels::gemm_strided's transposes).
  // Cut into blocks of kRows rows (whole 64-row blocks of the JIT kernels) by groups of kDxColumns
  // of dX's columns, the same cut at any thread count, for the pool to share.
  constexpr int64_t kRows = 256;
  if (K >= 128 && N >= 128) {
    const std::vector<std::shared_ptr<kernels::PackedWeights>>& groups = transposed(w, K, N);
    const int64_t row_blocks = (rows + kRows - 1) / kRows;
    const int64_t num_groups = static_cast<int64_t>(groups.size());
    auto block = [&](int64_t i, int) {
      const int64_t r0 = (i / num_groups) * kRows, r1 = std::min(rows, r0 + kRows);
      const int64_t g = i % num_groups;
      kernels::gemm_packed(static_cast<int>(r1 - r0), dy + r0 * N, N, *groups[size_t(g)],
                           dx + r0 * K + g * kDxColumns, K, false);
    };
    for_each_piece(pool, row_blocks * num_groups, block);
  } else
    kernels::gemm_strided(false, true, static_cast<int>(rows), K, N, dy, N, w, N, dx, K, false);
}

void WeightProducts::keep_rows(int param, int64_t offset, int K, int N, const float* x, const float* dy,
                               int64_t rows) {
  auto it = std::find_if(weight_rows_.begin(), weight_rows_.end(), [&](const WeightRows& r) {
    return r.param == param && r.offset == offset && r.K == K && r.N == N;
  });
  if (it == weight_rows_.end()) it = weight_rows_.insert(weight_rows_.end(), WeightRows{param, offset, K, N, {}, {}, 0});
  WeightRows& r = *it;
  // Grown, never shrunk: the next call reuses the memory without zeroing it again.
  if (r.x.size() < size_t(r.rows + rows) * K) r.x.resize(std::max(r.x.size() * 2, size_t(r.rows + rows) * K));
  if (r.dy.size() < size_t(r.rows + rows) * N) r.dy.resize(std::max(r.dy.size() * 2, size_t(r.rows + rows) * N));
  std::copy_n(x, rows * K, r.x.data() + r.rows * K);
  std::copy_n(dy, rows * N, r.dy.data() + r.rows * N);
  r.rows += rows;
}

size_t WeightProducts::bytes() const {
  size_t held = 0;
  for (const WeightRows& r : weight_rows_) held += (r.x.size() + r.dy.size()) * sizeof(float);
  for (const auto& [w, t] : transposed_) held += size_t(t.K) * t.N * sizeof(float);  // panels
  return held;
}

namespace {

// The block of dW += X^T dY, X [rows, K] and dY [rows, N], at W's rows [r0, r1) and columns
// [c0, c1), into dw (row stride N).
struct Block {
  int r0, r1, c0, c1;
};

void weight_gradient_block(const float* x, const float* dy, int64_t rows, int K, int N, Block b, float* dw) {
  kernels::gemm_strided(true, false, b.r1 - b.r0, b.c1 - b.c0, static_cast<int>(rows), x + b.r0, K, dy + b.c0, N,
                        dw + int64_t(b.r0) * N + b.c0, N, true);
}

// dW is cut into blocks of up to kRows x kColumns, always the same whatever the threads (a block is
// the same GEMM on one thread or many). Cutting W's rows as well as its columns gives a tall matrix
// (a transformer's second feed-forward layer, [2048, 512]) four blocks instead of one, for the
// threads to share; blocks of 256 rows, which would split a [512, 512] one too, measured no faster
// on two threads and up to 10% slower on one (the encoder's training step, noisy host).
constexpr int kRows = 512;
constexpr int kColumns = 512;

void append_blocks(int K, int N, FunctionRef<void(Block)> add) {
  for (int r = 0; r < K; r += kRows)
    for (int c = 0; c < N; c += kColumns) add(Block{r, std::min(K, r + kRows), c, std::min(N, c + kColumns)});
}

}  // namespace

void WeightProducts::weight_gradient(std::vector<Tensor>& grads, int param, int64_t offset, int K, int N,
                                     const float* x, const float* dy, int64_t rows, ThreadPool* pool) const {
  float* dw = grads[param].data.get() + offset;
  std::vector<Block> blocks;
  append_blocks(K, N, [&](Block b) { blocks.push_back(b); });
  for_each_piece(pool, static_cast<int64_t>(blocks.size()), [&](int64_t i, int) {
    weight_gradient_block(x, dy, rows, K, N, blocks[size_t(i)], dw);
  });
}

// One GEMM per matrix over every batch's rows.
void WeightProducts::weight_gradients(std::vector<Tensor>& grads, ThreadPool* pool,
                                      FunctionRef<void(int, int64_t, int64_t)> mark) const {
  struct Piece {
    const WeightRows* r;
    Block b;
  };
  std::vector<Piece> pieces;
  for (const WeightRows& r : weight_rows_) {
    if (r.rows == 0) continue;
    mark(r.param, r.offset, int64_t(r.K) * r.N);
    append_blocks(r.K, r.N, [&](Block b) { pieces.push_back({&r, b}); });
  }
  for_each_piece(pool, static_cast<int64_t>(pieces.size()), [&](int64_t i, int) {
    const Piece& p = pieces[size_t(i)];
    const WeightRows& r = *p.r;
    weight_gradient_block(r.x.data(), r.dy.data(), r.rows, r.K, r.N, p.b, grads[r.param].data.get() + r.offset);
  });
}

}  // namespace acrobat
