#include "runtime/batched_kernels.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <absl/container/flat_hash_map.h>

#include "acrobat/kernels.h"
#include "analysis/blocks.h"
#include "runtime/reference_kernels.h"
#include "runtime/shared_products.h"
#include "runtime/value.h"

namespace acrobat {

namespace {

namespace k = kernels;
using In = std::span<const BatchOperand>;
using Shape = std::vector<int64_t>;

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// The B tensors lie back to back (a single instance always does).
bool dense(const BatchOperand& op, int64_t batch) {
  return batch == 1 || op.stride == num_elements(*op.shape);
}

// Operators without a batched formulation run instance by instance with the reference kernels.
void per_instance(OpId id, const OpAttrs& attrs, int64_t batch, In in, const Shape& out_shape,
                  float* out) {
  std::vector<Tensor> views(in.size());
  std::vector<const Tensor*> ptrs(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    views[i].shape = *in[i].shape;
    ptrs[i] = &views[i];
  }
  Tensor result;
  result.shape = out_shape;
  int64_t n = num_elements(out_shape);
  for (int64_t b = 0; b < batch; ++b) {
    for (size_t i = 0; i < in.size(); ++i)
      views[i].data = Tensor::borrow(const_cast<float*>(in[i].data + b * in[i].stride));
    result.data = Tensor::borrow(out + b * n);
    reference_kernel(id)(attrs, ptrs, result);
  }
}

void kernel_MatMul(const OpAttrs&, int64_t batch, In in, const Shape& out_shape, float* out) {
  batched_matmul(batch, in[0], in[1], out_shape, out, false);
}

}  // namespace

void batched_matmul(int64_t batch, const BatchOperand& a, const BatchOperand& w,
                    const std::vector<int64_t>& out_shape, float* out, bool accumulate) {
  const Shape& as = *a.shape;
  const Shape& ws = *w.shape;
  const int K = static_cast<int>(as.back()), N = static_cast<int>(ws.back());
  if (ws.size() == 3) {
    // Stacks of matrices: one GEMM per instance and matrix.
    const int64_t H = as[0], M = as[1];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < H; ++h)
        k::gemm(static_cast<int>(M), N, K, a.data + b * a.stride + h * M * K, K,
                w.data + b * w.stride + h * K * N, N, out + (b * H + h) * M * N, N, accumulate);
    return;
  }
  // A stack [H, M, K] @ [K, N] is the panel [H * M, K] @ [K, N].
  const int M = static_cast<int>(num_elements(as) / K);
  if (w.stride == 0 && (dense(a, batch) || (M == 1 && a.stride >= K))) {
    // Shared weights: the instances' rows form one [B*M, K] panel (rows of one-row operands may lie
    // at any stride) and one GEMM.
    int rows = static_cast<int>(batch) * M;
    int lda = M == 1 && batch > 1 ? static_cast<int>(a.stride) : K;
    if (w.packed)
      gemm_packed_shared(rows, a.data, lda, *w.packed, out, N, accumulate);
    else
      k::gemm(rows, N, K, a.data, lda, w.data, N, out, N, accumulate);
    return;
  }
  for (int64_t b = 0; b < batch; ++b)
    k::gemm(M, N, K, a.data + b * a.stride, K, w.data + b * w.stride, N, out + b * M * N, N,
            accumulate);
}

namespace {

void binary(k::BinaryOp op, int64_t batch, In in, const Shape& out_shape, float* out) {
  const BatchOperand& a = in[0];
  const BatchOperand& b = in[1];
  int64_t n = num_elements(out_shape);
  if (*a.shape == out_shape && *b.shape == out_shape && dense(a, batch) && dense(b, batch)) {
    k::binary(op, a.data, b.data, out, static_cast<size_t>(batch * n));
    return;
  }
  // Broadcast over [batch, out_shape...]: the batch dimension has the operand's stride (0 when
  // shared), the others NumPy's right-aligned broadcasting strides.
  size_t rank = out_shape.size() + 1;
  Shape dims(rank), as(rank, 0), bs(rank, 0);
  dims[0] = batch;
  std::copy(out_shape.begin(), out_shape.end(), dims.begin() + 1);
  auto strides = [&](const BatchOperand& x, Shape& st) {
    st[0] = x.stride;
    int64_t stride = 1;
    const Shape& s = *x.shape;
    for (size_t i = s.size(); i-- > 0;) {
      st[rank - s.size() + i] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
  };
  strides(a, as);
  strides(b, bs);
  k::binary_broadcast(op, static_cast<int>(rank), dims.data(), a.data, as.data(), b.data, bs.data(),
                      out);
}
void kernel_Add(const OpAttrs&, int64_t batch, In in, const Shape& s, float* out) {
  binary(k::BinaryOp::Add, batch, in, s, out);
}
void kernel_Sub(const OpAttrs&, int64_t batch, In in, const Shape& s, float* out) {
  binary(k::BinaryOp::Sub, batch, in, s, out);
}
void kernel_Mul(const OpAttrs&, int64_t batch, In in, const Shape& s, float* out) {
  binary(k::BinaryOp::Mul, batch, in, s, out);
}
void kernel_Div(const OpAttrs&, int64_t batch, In in, const Shape& s, float* out) {
  binary(k::BinaryOp::Div, batch, in, s, out);
}

template <void (*fn)(const float*, float*, size_t)>
void unary(int64_t batch, In in, const Shape& s, float* out) {
  int64_t n = num_elements(s);
  if (dense(in[0], batch)) {
    fn(in[0].data, out, static_cast<size_t>(batch * n));
    return;
  }
  for (int64_t b = 0; b < batch; ++b) fn(in[0].data + b * in[0].stride, out + b * n, n);
}
void kernel_Neg(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::neg>(B, in, s, out); }
void kernel_Sigmoid(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::sigmoid>(B, in, s, out); }
void kernel_Tanh(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::tanh>(B, in, s, out); }
void kernel_Relu(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::relu>(B, in, s, out); }
void kernel_Exp(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::exp>(B, in, s, out); }
void kernel_Log(const OpAttrs&, int64_t B, In in, const Shape& s, float* out) { unary<k::log>(B, in, s, out); }

void kernel_Softmax(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  if (!dense(in[0], B)) return per_instance(OpId::Softmax, a, B, in, s, out);
  int cols = static_cast<int>(s.back());
  k::softmax(in[0].data, out, static_cast<int>(B * num_elements(s) / cols), cols);
}
void kernel_LogSoftmax(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  if (!dense(in[0], B)) return per_instance(OpId::LogSoftmax, a, B, in, s, out);
  int cols = static_cast<int>(s.back());
  k::log_softmax(in[0].data, out, static_cast<int>(B * num_elements(s) / cols), cols);
}
void kernel_LayerNorm(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  if (!dense(in[0], B) || in[1].stride != 0 || in[2].stride != 0)
    return per_instance(OpId::LayerNorm, a, B, in, s, out);
  int cols = static_cast<int>(s.back());
  k::layer_norm(in[0].data, in[1].data, in[2].data, k::kLayerNormEps, out,
                static_cast<int>(B * num_elements(s) / cols), cols);
}

void reduce(OpId id, k::ReduceOp op, const OpAttrs& attrs, int64_t B, In in, const Shape& s,
            float* out) {
  if (!dense(in[0], B)) return per_instance(id, attrs, B, in, s, out);
  const Shape& x = *in[0].shape;
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], x.size()));
  k::reduce(op, in[0].data, out, B * prod(x, 0, axis), x[axis], prod(x, axis + 1, x.size()));
}
void kernel_Sum(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  reduce(OpId::Sum, k::ReduceOp::Sum, a, B, in, s, out);
}
void kernel_Mean(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  reduce(OpId::Mean, k::ReduceOp::Mean, a, B, in, s, out);
}
void kernel_Max(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  reduce(OpId::Max, k::ReduceOp::Max, a, B, in, s, out);
}

void kernel_Concat(const OpAttrs& attrs, int64_t B, In in, const Shape& s, float* out) {
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], s.size()));
  int64_t outer = prod(s, 0, axis);
  int64_t out_cols = prod(s, axis, s.size());
  int64_t out_n = num_elements(s);
  int64_t offset = 0;
  for (const BatchOperand& x : in) {
    int64_t cols = prod(*x.shape, axis, x.shape->size());
    if (x.rows) {
      // Scattered operands are copied straight from where they lie: no gather first.
      for (int64_t b = 0; b < B; ++b)
        k::copy_2d(x.rows[b], cols, out + b * out_n + offset, out_cols, outer, cols);
    } else if (dense(x, B)) {
      // The B instances' [outer, cols] blocks stack into one [B*outer, cols] copy.
      k::copy_2d(x.data, cols, out + offset, out_cols, B * outer, cols);
    } else {
      for (int64_t b = 0; b < B; ++b)
        k::copy_2d(x.data + b * x.stride, cols, out + b * out_n + offset, out_cols, outer, cols);
    }
    offset += cols;
  }
}

void kernel_Slice(const OpAttrs& attrs, int64_t B, In in, const Shape& s, float* out) {
  const Shape& x = *in[0].shape;
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[2], x.size()));
  int64_t inner = prod(x, axis + 1, x.size());
  int64_t begin = attrs.ints[0], end = attrs.ints[1];
  int64_t outer = prod(x, 0, axis);
  int64_t cols = (end - begin) * inner;
  if (dense(in[0], B)) {
    k::copy_2d(in[0].data + begin * inner, x[axis] * inner, out, cols, B * outer, cols);
    return;
  }
  int64_t out_n = num_elements(s);
  for (int64_t b = 0; b < B; ++b)
    k::copy_2d(in[0].data + b * in[0].stride + begin * inner, x[axis] * inner, out + b * out_n, cols,
               outer, cols);
}

void kernel_Transpose(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Transpose, a, B, in, s, out);
}
void kernel_Heads(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Heads, a, B, in, s, out);
}
void kernel_MergeHeads(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::MergeHeads, a, B, in, s, out);
}
void kernel_Causal(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Causal, a, B, in, s, out);
}

void fill(int64_t B, const Shape& s, float* out, float v) { std::fill_n(out, B * num_elements(s), v); }
void kernel_Zeros(const OpAttrs&, int64_t B, In, const Shape& s, float* out) { fill(B, s, out, 0.0f); }
void kernel_Ones(const OpAttrs&, int64_t B, In, const Shape& s, float* out) { fill(B, s, out, 1.0f); }
void kernel_Constant(const OpAttrs& a, int64_t B, In, const Shape& s, float* out) {
  fill(B, s, out, static_cast<float>(a.value));
}
void kernel_HostScalar(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::HostScalar, a, B, in, s, out);  // the attributes bound to the instances' numbers
}
void kernel_Argmax(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Argmax, a, B, in, s, out);
}
void kernel_Sample(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Sample, a, B, in, s, out);
}
void kernel_Item(const OpAttrs& a, int64_t B, In in, const Shape& s, float* out) {
  per_instance(OpId::Item, a, B, in, s, out);
}

constexpr std::array<BatchedKernel, kNumOps> kKernels = {
#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) &kernel_##id,
#include "ops/ops.def"
#undef ACROBAT_OP
};
// Expanded from the rows of ops.def, so one entry per operator; a row without its kernel_<Id> does
// not compile, and an entry left out of a hand-edited table would be null:
static_assert(std::ranges::none_of(kKernels, [](auto k) { return k == nullptr; }), "a registry operator without a kernel");

}  // namespace

BatchedKernel batched_kernel(OpId op) { return kKernels[static_cast<size_t>(op)]; }

int64_t batched_matmul_grouped(int64_t B, const BatchOperand& a, const float* const* weights,
                               const kernels::PackedWeights* const* packed,
                               const std::vector<int64_t>& out_shape, float* out, Arena& scratch) {
  const int64_t K = a.shape->back(), M = num_elements(*a.shape) / K, N = out_shape.back();
  const int64_t a_stride = B == 1 ? M * K : a.stride;
  // g instances' rows of A, starting at `rows` (lda floats apart), times matrix w.
  auto gemm = [&](int64_t g, const float* rows, int64_t lda, int64_t first, float* c) {
    const kernels::PackedWeights* p = packed ? packed[first] : nullptr;
    if (p)
      gemm_packed_shared(static_cast<int>(g * M), rows, static_cast<int>(lda), *p, c, static_cast<int>(N), false);
    else
      k::gemm(static_cast<int>(g * M), static_cast<int>(N), static_cast<int>(K), rows,
              static_cast<int>(lda), weights[first], static_cast<int>(N), c, static_cast<int>(N),
              false);
  };
  // A run of adjacent instances is one panel of A when their matrices lie back to back (or are
  // single rows at a fixed stride).
  const bool panel = a_stride == M * K || (M == 1 && a_stride >= K);
  const int64_t panel_lda = M == 1 ? std::max<int64_t>(a_stride, K) : K;

  // Runs of adjacent instances sharing a matrix; if a matrix comes back after its run, group by
  // matrix instead.
  std::vector<std::pair<int64_t, int64_t>> runs;
  absl::flat_hash_map<const float*, int64_t> run_of;
  bool adjacent = true;
  for (int64_t b = 0; b < B; ++b) {
    if (b > 0 && weights[b] == weights[b - 1]) {
      runs.back().second = b + 1;
      continue;
    }
    adjacent = run_of.emplace(weights[b], static_cast<int64_t>(runs.size())).second && adjacent;
    runs.emplace_back(b, b + 1);
  }
  if (adjacent) {
    for (auto [b0, b1] : runs) {
      const int64_t g = b1 - b0;
      if (g == 1 || panel) {
        gemm(g, a.data + b0 * a_stride, g == 1 ? K : panel_lda, b0, out + b0 * M * N);
      } else {
        float* rows = scratch.alloc(static_cast<size_t>(g * M * K));
        for (int64_t b = b0; b < b1; ++b)
          std::memcpy(rows + (b - b0) * M * K, a.data + b * a_stride, M * K * sizeof(float));
        gemm(g, rows, K, b0, out + b0 * M * N);
      }
    }
    return static_cast<int64_t>(runs.size());
  }
  absl::flat_hash_map<const float*, std::vector<int64_t>> groups;
  std::vector<const float*> order;
  for (int64_t b = 0; b < B; ++b) {
    auto& g = groups[weights[b]];
    if (g.empty()) order.push_back(weights[b]);
    g.push_back(b);
  }
  for (const float* w : order) {
    const std::vector<int64_t>& members = groups[w];
    int64_t g = static_cast<int64_t>(members.size());
    float* rows = scratch.alloc(static_cast<size_t>(g * M * K));
    float* result = scratch.alloc(static_cast<size_t>(g * M * N));
    for (int64_t i = 0; i < g; ++i)
      std::memcpy(rows + i * M * K, a.data + members[i] * a_stride, M * K * sizeof(float));
    gemm(g, rows, K, members[0], result);
    for (int64_t i = 0; i < g; ++i)
      std::memcpy(out + members[i] * M * N, result + i * M * N, M * N * sizeof(float));
  }
  return static_cast<int64_t>(order.size());
}

int indexed_weight_arg(const analysis::StaticBlock& s) {
  for (size_t e = 0; e < s.args.size(); ++e) {
    const analysis::BlockArg& a = s.args[e];
    if (a.known && a.mode == analysis::ArgMode::Indexed && a.weights_only && a.shape.size() == 2)
      return static_cast<int>(e);
  }
  return -1;
}

std::vector<int> order_by_weights(const std::vector<const float*>& key) {
  // Each matrix numbered by its first appearance, so the order does not depend on addresses.
  absl::flat_hash_map<const float*, int> number;
  std::vector<int> rank(key.size());
  bool grouped = true;  // every matrix one run (the usual case of one matrix): the order stands
  for (size_t b = 0; b < key.size(); ++b) {
    rank[b] = number.try_emplace(key[b], static_cast<int>(number.size())).first->second;
    // A new matrix takes the next number; a smaller one than the last is a matrix coming back.
    grouped = grouped && (b == 0 || rank[b] >= rank[b - 1]);
  }
  if (grouped) return {};
  // A stable counting sort by number.
  std::vector<int> start(number.size() + 1, 0);
  for (int r : rank) start[static_cast<size_t>(r) + 1]++;
  for (size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
  std::vector<int> order(key.size());
  for (size_t b = 0; b < key.size(); ++b) order[static_cast<size_t>(start[static_cast<size_t>(rank[b])]++)] = static_cast<int>(b);
  return order;
}

}  // namespace acrobat
