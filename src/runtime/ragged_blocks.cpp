#include "runtime/ragged_blocks.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>

#include "acrobat/kernels.h"
#include "runtime/fused_loops.h"
#include "runtime/reference_kernels.h"
#include "runtime/shared_products.h"
#include "runtime/strided.h"
#include "runtime/value.h"
#include "support/clock.h"

namespace acrobat {

namespace k = kernels;
using analysis::BlockOp;
using analysis::BlockOperand;
using analysis::RaggedStep;
using analysis::StaticBlock;

namespace {

bool is_packed(const Strided& v, const int64_t* d, size_t rank) {
  Matrix m = matrix_of(d, rank);
  return !v.trans && (v.ld == m.N || m.M == 1) && (m.H == 1 || v.hs == m.M * m.N);
}

k::BinaryOp binary_op(OpId id) {
  switch (id) {
    case OpId::Add: return k::BinaryOp::Add;
    case OpId::Sub: return k::BinaryOp::Sub;
    case OpId::Mul: return k::BinaryOp::Mul;
    default: return k::BinaryOp::Div;
  }
}

// The per-call state of one piece of a batch: every operator's and argument's shape per instance,
// every value per instance, and the steps.
class Piece {
 public:
  Piece(const RaggedCall& c, const analysis::RaggedPlan& plan, const PackedIndex& packed)
      : c_(c), s_(*c.block), plan_(plan), packed_(packed), B_(c.B) {
    shapes(s_.ops.size(), [&](size_t k) -> const std::vector<int64_t>& { return s_.ops[k].shape; },
           op_dims_, op_dim_begin_, op_elems_);
    shapes(s_.args.size(), [&](size_t e) -> const std::vector<int64_t>& { return s_.args[e].shape; },
           arg_dims_, arg_dim_begin_, arg_elems_);
    vals_.resize(s_.ops.size() * static_cast<size_t>(B_));
  }

  void run() {
    for (size_t k = 0; k < s_.ops.size(); ++k) step(k);
    // Escaping views are copied to their outputs.
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      if (plan_.ops[k].step != RaggedStep::View || !s_.ops[k].escapes) continue;
      float* out = c_.outputs[k];
      for (int64_t b = 0; b < B_; ++b) {
        copy_out(val(k, b), op_dim(k, b), s_.ops[k].shape.size(), out);
        out += op_elems(k, b);
      }
      ++c_.counters->kernel_calls;
    }
    count_flops();
  }

 private:
  // ---- shapes and values ----
  template <class ShapeOf>
  void shapes(size_t n, ShapeOf&& shape_of, std::vector<int64_t>& dims, std::vector<size_t>& begin,
              std::vector<int64_t>& elems) {
    const size_t S = s_.sizes.size();
    begin.resize(n);
    elems.resize(n * static_cast<size_t>(B_));
    for (size_t k = 0; k < n; ++k) {
      const std::vector<int64_t>& shape = shape_of(k);
      begin[k] = dims.size();
      for (int64_t b = 0; b < B_; ++b) {
        int64_t count = 1;
        for (int64_t d : shape) {
          dims.push_back(ragged_dim(s_, d, c_.sizes + b * S));
          count *= dims.back();
        }
        elems[k * B_ + b] = count;
      }
    }
  }
  const int64_t* op_dim(size_t k, int64_t b) const {
    return op_dims_.data() + op_dim_begin_[k] + b * s_.ops[k].shape.size();
  }
  const int64_t* arg_dim(size_t e, int64_t b) const {
    return arg_dims_.data() + arg_dim_begin_[e] + b * s_.args[e].shape.size();
  }
  int64_t op_elems(size_t k, int64_t b) const { return op_elems_[k * B_ + b]; }
  Strided& val(size_t k, int64_t b) { return vals_[k * B_ + b]; }

  const int64_t* operand_dim(const BlockOperand& o, int64_t b) const {
    return o.local ? op_dim(o.index, b) : arg_dim(o.index, b);
  }
  size_t operand_rank(const BlockOperand& o) const {
    return o.local ? s_.ops[o.index].shape.size() : s_.args[o.index].shape.size();
  }
  int64_t operand_elems(const BlockOperand& o, int64_t b) const {
    return o.local ? op_elems(o.index, b) : arg_elems_[o.index * B_ + b];
  }
  Strided operand(const BlockOperand& o, int64_t b) {
    if (o.local) return val(o.index, b);
    return packed_value(const_cast<float*>(c_.args[o.index * c_.arg_stride + b]), arg_dim(o.index, b),
                        s_.args[o.index].shape.size());
  }
  // The operand's instance-b data as a packed tensor (copied to scratch when it is a view).
  float* contiguous(const BlockOperand& o, int64_t b) {
    Strided v = operand(o, b);
    const int64_t* d = operand_dim(o, b);
    const size_t rank = operand_rank(o);
    if (is_packed(v, d, rank)) return v.p;
    float* out = c_.scratch->alloc(static_cast<size_t>(operand_elems(o, b)));
    copy_out(v, d, rank, out);
    return out;
  }
  static void copy_out(const Strided& v, const int64_t* d, size_t rank, float* out) {
    Matrix m = matrix_of(d, rank);
    for (int64_t h = 0; h < m.H; ++h) {
      const float* src = v.p + h * v.hs;
      float* dst = out + h * m.M * m.N;
      if (!v.trans) {
        k::copy_2d(src, v.ld, dst, m.N, m.M, m.N);
        continue;
      }
      for (int64_t i = 0; i < m.M; ++i)  // the stored matrix is [N, M] with row stride ld
        for (int64_t j = 0; j < m.N; ++j) dst[i * m.N + j] = src[j * v.ld + i];
    }
  }
  // Whether the instances' data of `o` lie one after another, packed (one panel for the piece).
  bool chained(const BlockOperand& o) {
    for (int64_t b = 0; b < B_; ++b) {
      Strided v = operand(o, b);
      if (!is_packed(v, operand_dim(o, b), operand_rank(o))) return false;
      if (b > 0 && v.p != operand(o, b - 1).p + operand_elems(o, b - 1)) return false;
    }
    return true;
  }
  // One matrix for every instance: a parameter or constant argument.
  bool shared(const BlockOperand& o) const {
    if (o.local) return false;
    if (is_ragged(s_.args[o.index].shape)) return false;
    for (int64_t b = 1; b < B_; ++b)
      if (c_.args[o.index * c_.arg_stride + b] != c_.args[o.index * c_.arg_stride]) return false;
    return true;
  }

  // Storage for operator k's packed values: an escaping operator's output, else scratch. A matmul
  // with operators fused into it writes the last one's storage; their values are views of it.
  void allocate(size_t k) {
    if (float* const* grown = grown_outputs(k)) {  // growing storage: instance by instance
      for (int64_t b = 0; b < B_; ++b) val(k, b) = packed_value(grown[b], op_dim(k, b), s_.ops[k].shape.size());
      return;
    }
    const analysis::RaggedOpPlan& o = plan_.ops[k];
    const size_t store = o.store >= 0 ? static_cast<size_t>(o.store) : k;
    float* base = c_.outputs[store];
    if (!base) {
      int64_t total = 0;
      for (int64_t b = 0; b < B_; ++b) total += op_elems(store, b);
      base = c_.scratch->alloc(static_cast<size_t>(std::max<int64_t>(total, 1)));
    }
    for (int64_t b = 0; b < B_; ++b) {
      for (size_t j = k + 1; j <= store; ++j)
        if (plan_.ops[j].alias == static_cast<int>(k))
          val(j, b) = packed_value(base, op_dim(j, b), s_.ops[j].shape.size());
      if (o.merged) {  // the stack [H, n, E] inside [n, H * E]: head h at column h * E
        const int64_t* d = op_dim(k, b);
        val(k, b) = Strided{base, d[2], d[0] * d[2], false};
      } else {
        val(k, b) = packed_value(base, op_dim(k, b), s_.ops[k].shape.size());
      }
      base += op_elems(store, b);
    }
  }

  // ---- steps ----
  void step(size_t k) {
    switch (plan_.ops[k].step) {
      case RaggedStep::View: view(k); return;
      case RaggedStep::Alias: return;  // its matmul wrote it
      case RaggedStep::Fused:
        if (plan_.ops[k].group == static_cast<int>(k)) fused_group(k);
        return;
      default: break;
    }
    allocate(k);
    switch (plan_.ops[k].step) {
      case RaggedStep::GemmShared:
      case RaggedStep::GemmIndexed: {
        const auto start = Clock::now();
        gemm_weights(k);
        c_.counters->weight_gemm_seconds +=
            seconds_since(start);
        break;
      }
      case RaggedStep::GemmPerInstance: gemm_per_instance(k); break;
      case RaggedStep::Append: append(k); break;
      case RaggedStep::Elementwise: elementwise(k); break;
      case RaggedStep::RowWise: row_wise(k); break;
      default: per_instance(k); break;
    }
  }

  void view(size_t k) {
    const BlockOp& op = s_.ops[k];
    for (int64_t b = 0; b < B_; ++b)
      val(k, b) = through_view(operand(op.operands[0], b), plan_.ops[k].view, op.rhs->attrs, op_dim(k, b));
  }

  // A matmul by weights that are parameters (one matrix for all, or one per run of instances).
  void gemm_weights(size_t k) {
    const BlockOp& op = s_.ops[k];
    const BlockOperand& a = op.operands[0];
    const int e = op.operands[1].index;
    const int64_t N = op_dim(k, 0)[s_.ops[k].shape.size() - 1];
    // The rows of A: one panel with one row stride, read in place when the instances' rows lie
    // one after another at one stride, else gathered.
    std::vector<int64_t> first_row(static_cast<size_t>(B_) + 1, 0);
    const size_t arank = operand_rank(a);
    const int64_t K = operand_dim(a, 0)[arank - 1];
    for (int64_t b = 0; b < B_; ++b) first_row[b + 1] = first_row[b] + operand_elems(a, b) / K;
    const float* A = nullptr;
    int64_t lda = K;
    bool in_place = true;
    const int64_t ld0 = operand(a, 0).ld;
    for (int64_t b = 0; b < B_ && in_place; ++b) {
      Strided v = operand(a, b);
      Matrix m = matrix_of(operand_dim(a, b), arank);
      in_place = !v.trans && v.ld == ld0 && (m.H == 1 || v.hs == m.M * v.ld) &&
                 (b == 0 || v.p == operand(a, b - 1).p + (first_row[b] - first_row[b - 1]) * ld0);
    }
    if (in_place) {
      A = operand(a, 0).p;
      lda = operand(a, 0).ld;
    } else {
      float* g = c_.scratch->alloc(static_cast<size_t>(first_row[B_] * K));
      for (int64_t b = 0; b < B_; ++b) copy_out(operand(a, b), operand_dim(a, b), arank, g + first_row[b] * K);
      A = g;
      ++c_.counters->kernel_calls;
    }
    float* C = val(k, 0).p;
    const analysis::RaggedOpPlan& plan = plan_.ops[k];
    for (int64_t b0 = 0; b0 < B_;) {
      const float* W = c_.args[e * c_.arg_stride + b0];
      int64_t b1 = b0 + 1;
      while (b1 < B_ && c_.args[e * c_.arg_stride + b1] == W) ++b1;
      const int M = static_cast<int>(first_row[b1] - first_row[b0]);
      const float* Ab = A + first_row[b0] * lda;
      float* Cb = C + first_row[b0] * N;
      if (const k::PackedWeights* pw = packed_.find(W))
        gemm_packed_shared(M, Ab, static_cast<int>(lda), *pw, Cb, static_cast<int>(N), false);
      else
        k::gemm(M, static_cast<int>(N), static_cast<int>(K), Ab, static_cast<int>(lda), W,
                static_cast<int>(N), Cb, static_cast<int>(N), false);
      ++c_.counters->kernel_calls;
      b0 = b1;
    }
    // Then the fused addends (an operand of the result's shape, a shared row, or both), added to
    // the finished product: a GEMM accumulating onto them would round each of its K partial sums
    // to the addend's magnitude (a residual's), several times the error of the reference's order.
    if (plan.init) {
      for (int64_t b = 0; b < B_; ++b) {
        float* Cb = C + first_row[b] * N;
        const int64_t rows = first_row[b + 1] - first_row[b];
        if (plan.init_from.index >= 0)
          k::binary(k::BinaryOp::Add, Cb, contiguous(plan.init_from, b), Cb, static_cast<size_t>(rows * N));
        if (plan.init_row < 0) continue;
        const int64_t dims[2] = {rows, N}, cs[2] = {N, 1}, rs[2] = {0, 1};
        k::binary_broadcast(k::BinaryOp::Add, 2, dims, Cb, cs, c_.args[plan.init_row * c_.arg_stride + b], rs, Cb);
      }
      ++c_.counters->kernel_calls;
    }
    c_.counters->weight_gemm_flops += 2 * first_row[B_] * N * K;
  }

  // Per instance and matrix of a stack: op(A) @ op(B), reading views (column slices, heads,
  // transposes) in place.
  void gemm_per_instance(size_t k) {
    const BlockOp& op = s_.ops[k];
    const BlockOperand& a = op.operands[0];
    const BlockOperand& w = op.operands[1];
    const size_t arank = operand_rank(a), wrank = operand_rank(w);
    const analysis::RaggedOpPlan& plan = plan_.ops[k];
    const float alpha = plan.scale >= 0 ? c_.args[plan.scale * c_.arg_stride][0] : 1.0f;
    for (int64_t b = 0; b < B_; ++b) {
      Strided A = operand(a, b), W = operand(w, b);
      Matrix ma = matrix_of(operand_dim(a, b), arank);
      const int64_t* dw = operand_dim(w, b);
      const int64_t N = dw[wrank - 1], K = ma.N;
      const Strided C = val(k, b);  // packed, or heads merged
      for (int64_t h = 0; h < ma.H; ++h) {
        k::gemm_strided(A.trans, W.trans, static_cast<int>(ma.M), static_cast<int>(N), static_cast<int>(K),
                        A.p + h * A.hs, static_cast<int>(A.ld), W.p + (wrank == 3 ? h * W.hs : 0),
                        static_cast<int>(W.ld), C.p + h * C.hs, static_cast<int>(C.ld), false, alpha);
        ++c_.counters->kernel_calls;
      }
    }
  }

  void elementwise(size_t k) {
    const BlockOp& op = s_.ops[k];
    const OpId id = op.rhs->op;
    const size_t rank = op.shape.size();
    if (op.operands.size() == 1) {
      if (chained(op.operands[0])) {
        int64_t total = 0;
        for (int64_t b = 0; b < B_; ++b) total += op_elems(k, b);
        unary(id, operand(op.operands[0], 0).p, val(k, 0).p, total);
        ++c_.counters->kernel_calls;
        return;
      }
      for (int64_t b = 0; b < B_; ++b) unary(id, contiguous(op.operands[0], b), val(k, b).p, op_elems(k, b));
      c_.counters->kernel_calls += B_;
      return;
    }
    // The piece at once as [rows, N] when each operand is the result's shape with the instances
    // one after another, or one tensor for all (a scalar, or a row of N broadcast down the rows).
    const int64_t N = rank ? op_dim(k, 0)[rank - 1] : 1;
    bool whole = true;
    for (int64_t b = 1; b < B_ && whole; ++b) whole = rank && op_dim(k, b)[rank - 1] == N;
    int64_t strides[2][2];
    for (int i = 0; i < 2 && whole; ++i) {
      const BlockOperand& o = op.operands[i];
      const size_t r = operand_rank(o);
      bool aligned = r == rank;
      for (int64_t b = 0; b < B_ && aligned; ++b)
        aligned = std::equal(op_dim(k, b), op_dim(k, b) + rank, operand_dim(o, b));
      if (aligned && chained(o)) {
        strides[i][0] = N;
        strides[i][1] = 1;
        continue;
      }
      if (!shared(o)) {
        whole = false;
        break;
      }
      const int64_t* d = operand_dim(o, 0);
      const int64_t elems = operand_elems(o, 0);
      if (elems == 1) {
        strides[i][0] = strides[i][1] = 0;
      } else if (r >= 1 && d[r - 1] == N && elems == N) {
        strides[i][0] = 0;
        strides[i][1] = 1;
      } else {
        whole = false;
      }
    }
    if (whole) {
      int64_t total = 0;
      for (int64_t b = 0; b < B_; ++b) total += op_elems(k, b);
      const int64_t dims[2] = {total / N, N};
      k::binary_broadcast(binary_op(id), 2, dims, operand(op.operands[0], 0).p, strides[0],
                          operand(op.operands[1], 0).p, strides[1], val(k, 0).p);
      ++c_.counters->kernel_calls;
      return;
    }
    per_instance(k);
  }

  // A fused elementwise group (ragged_plan.h, 4.) starting at operator `first`: instance by
  // instance, tile by tile (a row of the last axis when a row is broadcast), each member on the
  // tile with its SIMD expression; members read after the group are stored, the others live in
  // tiles only.
  void fused_group(size_t first) {
    using analysis::FusedLoad;
    std::vector<size_t> members;
    for (size_t i = first; i < s_.ops.size() && plan_.ops[i].group == static_cast<int>(first); ++i) members.push_back(i);
    const size_t rank = s_.ops[first].shape.size();
    bool rows = false;
    for (size_t i : members)
      for (FusedLoad l : plan_.ops[i].loads) rows = rows || l == FusedLoad::RowBroadcast;
    for (size_t i : members)
      if (plan_.ops[i].stored) allocate(i);
    int64_t max_tile = 1;
    for (int64_t b = 0; b < B_; ++b)
      max_tile = std::max(max_tile, rows ? op_dim(first, b)[rank - 1] : std::min<int64_t>(op_elems(first, b), kFusedTile));
    float* tiles = c_.scratch->alloc(static_cast<size_t>(3 * members.size() * max_tile));
    std::vector<const float*> cur(s_.ops.size(), nullptr);
    for (int64_t b = 0; b < B_; ++b) {
      const int64_t elems = op_elems(first, b);
      const int64_t tile = rows ? op_dim(first, b)[rank - 1] : std::min<int64_t>(elems, kFusedTile);
      for (int64_t j0 = 0; j0 < elems; j0 += tile) {
        const int64_t len = std::min(tile, elems - j0);
        for (size_t t = 0; t < members.size(); ++t) {
          const size_t i = members[t];
          const BlockOp& op = s_.ops[i];
          float* own = tiles + 3 * t * max_tile;
          const float* in[2] = {nullptr, nullptr};
          for (size_t a = 0; a < op.operands.size(); ++a) {
            const BlockOperand& o = op.operands[a];
            switch (plan_.ops[i].loads[a]) {
              case FusedLoad::Register: in[a] = cur[o.index]; break;
              case FusedLoad::Full: in[a] = operand(o, b).p + j0; break;
              case FusedLoad::Splat: {
                float* splat = own + (a + 1) * max_tile;
                std::fill(splat, splat + len, operand(o, b).p[0]);
                in[a] = splat;
                break;
              }
              default: in[a] = operand(o, b).p; break;  // a row, the tile being one row
            }
          }
          float* out = plan_.ops[i].stored ? val(i, b).p + j0 : own;
          fused_tile_fn(op.rhs->op)(len, in[0], in[1], out);
          cur[i] = out;
        }
      }
    }
    c_.counters->kernel_calls += 1;
  }
  static constexpr int64_t kFusedTile = 1024;

  // A unary elementwise operator over n floats: its SIMD expression of ops.def.
  static void unary(OpId id, const float* x, float* y, int64_t n) { fused_tile_fn(id)(n, x, nullptr, y); }

  void row_wise(size_t k) {
    const BlockOp& op = s_.ops[k];
    const size_t rank = op.shape.size();
    const int64_t N = op_dim(k, 0)[rank - 1];
    bool whole = chained(op.operands[0]);
    for (int64_t b = 1; b < B_ && whole; ++b) whole = op_dim(k, b)[rank - 1] == N;
    for (size_t i = 1; i < op.operands.size() && whole; ++i) whole = shared(op.operands[i]);
    auto run = [&](const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t cols) {
      const int r = static_cast<int>(rows), n = static_cast<int>(cols);
      switch (op.rhs->op) {
        case OpId::Softmax: k::softmax(x, y, r, n); break;
        case OpId::LogSoftmax: k::log_softmax(x, y, r, n); break;
        default: k::layer_norm(x, gamma, beta, k::kLayerNormEps, y, r, n); break;
      }
      ++c_.counters->kernel_calls;
    };
    const bool norm = op.rhs->op == OpId::LayerNorm;
    if (whole) {
      int64_t total = 0;
      for (int64_t b = 0; b < B_; ++b) total += op_elems(k, b);
      run(operand(op.operands[0], 0).p, norm ? operand(op.operands[1], 0).p : nullptr,
          norm ? operand(op.operands[2], 0).p : nullptr, val(k, 0).p, total / N, N);
      return;
    }
    for (int64_t b = 0; b < B_; ++b) {
      const int64_t cols = op_dim(k, b)[rank - 1];
      run(contiguous(op.operands[0], b), norm ? contiguous(op.operands[1], b) : nullptr,
          norm ? contiguous(op.operands[2], b) : nullptr, val(k, b).p, op_elems(k, b) / cols, cols);
    }
  }

  // Operator k's values in growing storage, instance by instance, or null.
  float* const* grown_outputs(size_t k) const {
    if (!c_.grown || !c_.grown[k * c_.grown_stride]) return nullptr;
    return c_.grown + k * c_.grown_stride;
  }

  // concat(x, y, ..., axis=0): the operands one after another (row-major, so axis 0 is the flat
  // order), x's rows left where they lie when the growing storage already holds them.
  void append(size_t k) {
    const BlockOp& op = s_.ops[k];
    const uint8_t* in_place = grown_outputs(k) ? c_.grown_in_place + k * c_.grown_stride : nullptr;
    int64_t copied = 0;
    for (int64_t b = 0; b < B_; ++b) {
      float* out = val(k, b).p;
      for (size_t i = 0; i < op.operands.size(); ++i) {
        const BlockOperand& o = op.operands[i];
        const int64_t elems = operand_elems(o, b);
        if (i > 0 || !in_place || !in_place[b]) {
          copy_out(operand(o, b), operand_dim(o, b), operand_rank(o), out);
          copied += elems;
        }
        out += elems;
      }
    }
    c_.counters->kernel_calls += B_;
    c_.counters->append_copied_floats += copied;
  }

  // The reference kernel, instance by instance, on packed copies of the operands.
  void per_instance(size_t k) {
    const BlockOp& op = s_.ops[k];
    std::vector<Tensor> in(op.operands.size());
    std::vector<const Tensor*> ptrs(in.size());
    Tensor out;
    for (int64_t b = 0; b < B_; ++b) {
      const int64_t* sizes = c_.sizes + b * s_.sizes.size();
      const OpAttrs attrs = bind_attr_sizes(op.rhs->attrs, s_.sizes.data(), sizes, s_.sizes.size());
      for (size_t i = 0; i < in.size(); ++i) {
        const BlockOperand& o = op.operands[i];
        const int64_t* d = operand_dim(o, b);
        in[i].shape.assign(d, d + operand_rank(o));
        in[i].data = Tensor::borrow(contiguous(o, b));
        ptrs[i] = &in[i];
      }
      out.shape.assign(op_dim(k, b), op_dim(k, b) + op.shape.size());
      out.data = Tensor::borrow(val(k, b).p);
      reference_kernel(op.rhs->op)(attrs, std::span<const Tensor* const>(ptrs.data(), ptrs.size()), out);
    }
    c_.counters->kernel_calls += B_;
  }

  // The registry's FLOP count of every operator, on each instance's shapes.
  void count_flops() {
    std::vector<std::vector<int64_t>> in;
    std::vector<int64_t> out;
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      const BlockOp& op = s_.ops[k];
      const OpInfo& info = op_info(op.rhs->op);
      in.resize(op.operands.size());
      for (int64_t b = 0; b < B_; ++b) {
        const int64_t* sizes = c_.sizes + b * s_.sizes.size();
        const OpAttrs attrs = bind_attr_sizes(op.rhs->attrs, s_.sizes.data(), sizes, s_.sizes.size());
        for (size_t i = 0; i < in.size(); ++i) {
          const int64_t* d = operand_dim(op.operands[i], b);
          in[i].assign(d, d + operand_rank(op.operands[i]));
        }
        out.assign(op_dim(k, b), op_dim(k, b) + op.shape.size());
        c_.counters->flops += info.flops(in, out, attrs);
      }
    }
  }

  const RaggedCall& c_;
  const StaticBlock& s_;
  const analysis::RaggedPlan& plan_;
  const PackedIndex& packed_;
  const int64_t B_;
  std::vector<int64_t> op_dims_, arg_dims_;
  std::vector<size_t> op_dim_begin_, arg_dim_begin_;
  std::vector<int64_t> op_elems_, arg_elems_;
  std::vector<Strided> vals_;
};

}  // namespace

int64_t ragged_dim(const StaticBlock& s, int64_t dim, const int64_t* sizes) {
  return size_value(dim, s.sizes.data(), sizes, s.sizes.size());
}

int64_t ragged_elements(const StaticBlock& s, size_t k, const int64_t* sizes, bool arg) {
  const std::vector<int64_t>& shape = arg ? s.args[k].shape : s.ops[k].shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= ragged_dim(s, d, sizes);
  return n;
}

void RaggedBlocks::run(const RaggedCall& c) const {
  Piece(c, plan_.ragged[c.block->id], packed_).run();
}

}  // namespace acrobat
