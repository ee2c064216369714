#include "autodiff/adjoints.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "acrobat/kernels.h"
#include "kernels/vec_math.h"
#include "support/diagnostics.h"

namespace acrobat {

namespace {

int64_t prod(std::span<const int64_t> s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}
int64_t count(std::span<const int64_t> s) { return prod(s, 0, s.size()); }

// The row-major strides of `shape` right-aligned to `rank` dimensions, 0 along the dimensions it is
// broadcast along (size 1, or missing).
std::vector<int64_t> broadcast_strides(std::span<const int64_t> shape, size_t rank) {
  std::vector<int64_t> st(rank, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[rank - shape.size() + i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return st;
}

// Calls run(out_index, a_index, b_index, len, a_step, b_step) for every run of `out` along its last
// dimension: elements out_index + j, a_index + j * a_step and b_index + j * b_step for j < len, a and
// b broadcast to out (a step is 1, or 0 along a broadcast dimension). The loop over a run is the
// caller's, with constant steps, so that it vectorises.
template <class Run>
void broadcast_runs(std::span<const int64_t> out, std::span<const int64_t> a, std::span<const int64_t> b, Run&& run) {
  const size_t rank = out.size();
  const int64_t n = count(out);
  if (rank == 0) {
    if (n > 0) run(0, 0, 0, 1, 0, 0);
    return;
  }
  const std::vector<int64_t> as = broadcast_strides(a, rank), bs = broadcast_strides(b, rank);
  const int64_t len = out[rank - 1];
  if (len == 0) return;
  std::vector<int64_t> idx(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; i += len) {
    run(i, ia, ib, len, as[rank - 1], bs[rank - 1]);
    for (size_t d = rank - 1; d-- > 0;) {  // odometer step over the outer dimensions
      ++idx[d];
      ia += as[d];
      ib += bs[d];
      if (idx[d] < out[d]) break;
      ia -= as[d] * out[d];
      ib -= bs[d] * out[d];
      idx[d] = 0;
    }
  }
}

// A matmul's operands as stacks: [H, M, K] @ [H or 1, K, N] (a 2-D operand is a stack of one).
struct MatMulDims {
  int64_t H, M, K, N;
  bool b_stacked;
};
template <class T>
MatMulDims matmul_dims(std::span<const TensorArg<T>> in) {
  const auto& a = in[0].shape;
  const auto& b = in[1].shape;
  const bool stacked = a.size() == 3;
  return {stacked ? a[0] : 1, a[a.size() - 2], a.back(), b.back(), b.size() == 3};
}

// transpose of the last two axes of a tensor of `shape`: f(from, to) for every element, its
// positions in the input and in the result.
template <class F>
void transpose_each(std::span<const int64_t> shape, F&& f) {
  const int64_t r = shape[shape.size() - 2], c = shape.back(), stack = count(shape) / std::max<int64_t>(1, r * c);
  for (int64_t h = 0; h < stack; ++h)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) f(h * r * c + i * c + j, h * r * c + j * r + i);
}

// heads: [M, H * E] -> [H, M, E], merge_heads the inverse: f(flat, stacked) for every element, the
// two positions of one element (`stack` = [H, M, E]).
template <class F>
void heads_each(std::span<const int64_t> stack, F&& f) {
  const int64_t H = stack[0], M = stack[1], E = stack[2];
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t e = 0; e < E; ++e) f(m * H * E + h * E + e, h * M * E + m * E + e);
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Row statistics of layer_norm: the mean and 1 / sqrt(var + eps) (biased variance), in T.
template <class T>
void row_stats(const T* x, int64_t n, T& mean, T& rstd) {
  T s = 0;
  for (int64_t j = 0; j < n; ++j) s += x[j];
  mean = s / T(n);
  T v = 0;
  for (int64_t j = 0; j < n; ++j) v += (x[j] - mean) * (x[j] - mean);
  rstd = T(1) / std::sqrt(v / T(n) + T(1e-5));
}

}  // namespace

bool differentiable(OpId op) {
  switch (op_info(op).op_class) {
    case OpClass::Constant:
    case OpClass::HostRead: return false;
    default: return true;
  }
}

// As adjoint() below reads them.
AdjointReads adjoint_reads(OpId op) {
  switch (op) {
    case OpId::Add:
    case OpId::Sub:
    case OpId::Neg:
    case OpId::Sum:
    case OpId::Mean:
    case OpId::Concat:
    case OpId::Slice:
    case OpId::Transpose:
    case OpId::Heads:
    case OpId::MergeHeads:
    case OpId::Causal: return {false, false};
    case OpId::Sigmoid:
    case OpId::Tanh:
    case OpId::Exp:
    case OpId::Softmax:
    case OpId::LogSoftmax: return {false, true};
    case OpId::MatMul:
    case OpId::Mul:
    case OpId::Div:
    case OpId::Relu:
    case OpId::Log:
    case OpId::LayerNorm:
    case OpId::Max: return {true, false};
    default: return {};
  }
}

std::optional<kernels::UnaryBackward> unary_backward_kernel(OpId op) {
  switch (op) {
    case OpId::Relu: return kernels::UnaryBackward::Relu;
    case OpId::Tanh: return kernels::UnaryBackward::Tanh;
    case OpId::Sigmoid: return kernels::UnaryBackward::Sigmoid;
    case OpId::Exp: return kernels::UnaryBackward::Exp;
    default: return std::nullopt;
  }
}

template <class T>
void forward(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in, std::span<const int64_t> out_shape,
             T* out) {
  const int64_t n = count(out_shape);
  auto binary = [&](auto f) {
    broadcast_runs(out_shape, in[0].shape, in[1].shape,
                   [&](int64_t i, int64_t ia, int64_t ib, int64_t len, int64_t sa, int64_t sb) {
                     const T* a = in[0].data + ia;
                     const T* b = in[1].data + ib;
                     T* y = out + i;
                     for (int64_t j = 0; j < len; ++j) y[j] = f(a[j * sa], b[j * sb]);
                   });
  };
  auto unary = [&](auto f) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[0].data[i]);
  };
  const int64_t cols = out_shape.empty() ? 1 : out_shape.back();
  const int64_t rows = cols > 0 ? n / cols : 0;
  switch (op) {
    case OpId::MatMul: {
      const MatMulDims d = matmul_dims(in);
      for (int64_t h = 0; h < d.H; ++h) {
        const T* a = in[0].data + h * d.M * d.K;
        const T* b = in[1].data + (d.b_stacked ? h * d.K * d.N : 0);
        T* c = out + h * d.M * d.N;
        for (int64_t i = 0; i < d.M; ++i)
          for (int64_t j = 0; j < d.N; ++j) {
            T s = 0;
            for (int64_t k = 0; k < d.K; ++k) s += a[i * d.K + k] * b[k * d.N + j];
            c[i * d.N + j] = s;
          }
      }
      return;
    }
    case OpId::Add: return binary([](T a, T b) { return a + b; });
    case OpId::Sub: return binary([](T a, T b) { return a - b; });
    case OpId::Mul: return binary([](T a, T b) { return a * b; });
    case OpId::Div: return binary([](T a, T b) { return a / b; });
    case OpId::Neg: return unary([](T a) { return -a; });
    case OpId::Sigmoid: return unary([](T a) { return sigmoid(a); });
    case OpId::Tanh: return unary([](T a) { return std::tanh(a); });
    case OpId::Relu: return unary([](T a) { return a > 0 ? a : T(0); });
    case OpId::Exp: return unary([](T a) { return std::exp(a); });
    case OpId::Log: return unary([](T a) { return std::log(a); });
    case OpId::Softmax:
    case OpId::LogSoftmax:
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = in[0].data + r * cols;
        T* y = out + r * cols;
        const T m = *std::max_element(x, x + cols);
        T s = 0;
        for (int64_t j = 0; j < cols; ++j) s += std::exp(x[j] - m);
        for (int64_t j = 0; j < cols; ++j)
          y[j] = op == OpId::Softmax ? std::exp(x[j] - m) / s : x[j] - m - std::log(s);
      }
      return;
    case OpId::LayerNorm:
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = in[0].data + r * cols;
        T mean, rstd;
        row_stats(x, cols, mean, rstd);
        for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = (x[j] - mean) * rstd * in[1].data[j] + in[2].data[j];
      }
      return;
    case OpId::Sum:
    case OpId::Mean:
    case OpId::Max: {
      const auto& s = in[0].shape;
      const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], s.size()));
      const int64_t outer = prod(s, 0, axis), len = s[axis], inner = prod(s, axis + 1, s.size());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* x = in[0].data + o * len * inner + i;
          T acc = op == OpId::Max ? x[0] : T(0);
          for (int64_t j = 0; j < len; ++j) acc = op == OpId::Max ? std::max(acc, x[j * inner]) : acc + x[j * inner];
          out[o * inner + i] = op == OpId::Mean ? acc / T(len) : acc;
        }
      return;
    }
    case OpId::Concat: {
      const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], out_shape.size()));
      const int64_t outer = prod(out_shape, 0, axis), out_cols = prod(out_shape, axis, out_shape.size());
      int64_t offset = 0;
      for (const TensorArg<T>& t : in) {
        const int64_t c = prod(t.shape, axis, t.shape.size());
        for (int64_t o = 0; o < outer; ++o) std::copy_n(t.data + o * c, c, out + o * out_cols + offset);
        offset += c;
      }
      return;
    }
    case OpId::Slice: {
      const auto& s = in[0].shape;
      const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[2], s.size()));
      const int64_t inner = prod(s, axis + 1, s.size()), outer = prod(s, 0, axis);
      const int64_t begin = attrs.ints[0], width = (attrs.ints[1] - begin) * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(in[0].data + o * s[axis] * inner + begin * inner, width, out + o * width);
      return;
    }
    case OpId::Transpose: {
      transpose_each(in[0].shape, [&](int64_t from, int64_t to) { out[to] = in[0].data[from]; });
      return;
    }
    case OpId::Heads:
    case OpId::MergeHeads: {
      // heads: [M, H * E] -> [H, M, E]; merge_heads the inverse.
      const bool split = op == OpId::Heads;
      heads_each(split ? out_shape : in[0].shape, [&](int64_t flat, int64_t stacked) {
        if (split)
          out[stacked] = in[0].data[flat];
        else
          out[flat] = in[0].data[stacked];
      });
      return;
    }
    case OpId::Causal: {
      const int64_t cols = out_shape.back();
      for (int64_t r = 0; r < n / cols; ++r)
        for (int64_t j = 0; j < cols; ++j)
          out[r * cols + j] = j <= r % cols ? in[0].data[r * cols + j] : -std::numeric_limits<T>::infinity();
      return;
    }
    case OpId::Zeros: std::fill_n(out, n, T(0)); return;
    case OpId::Ones: std::fill_n(out, n, T(1)); return;
    case OpId::Constant: std::fill_n(out, n, static_cast<T>(attrs.value)); return;
    case OpId::HostScalar: std::fill_n(out, n, static_cast<T>(static_cast<float>(std::bit_cast<double>(attrs.ints[0])))); return;
    case OpId::Argmax: out[0] = static_cast<T>(kernels::ranked_argmax(in[0].data, count(in[0].shape), attrs.ints[0])); return;
    case OpId::Item: out[0] = in[0].data[0]; return;
    case OpId::Sample: out[0] = static_cast<T>(kernels::sample_scalar(in[0].data, count(in[0].shape), attrs.ints[0])); return;
  }
  internal_error(__FILE__, __LINE__, "forward: unknown operator");
}

namespace {

// C = A B per matrix of the stack: dA += dC B^T, dB += A^T dC (summed over the stack when B is one
// matrix for all).
template <class T>
void matmul_adjoint(std::span<const TensorArg<T>> in, const T* dy, std::span<T* const> din) {
  const MatMulDims d = matmul_dims(in);
  if constexpr (std::is_same_v<T, float>) {
    // The GEMM kernels, with the transposes read in place.
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t b_off = d.b_stacked ? h * d.K * d.N : 0;
      const float* a = in[0].data + h * d.M * d.K;
      const float* dc = dy + h * d.M * d.N;
      const int M = static_cast<int>(d.M), N = static_cast<int>(d.N), K = static_cast<int>(d.K);
      if (din[0]) kernels::gemm_strided(false, true, M, K, N, dc, N, in[1].data + b_off, N, din[0] + h * d.M * d.K, K, true);
      if (din[1]) kernels::gemm_strided(true, false, K, N, M, a, K, dc, N, din[1] + b_off, N, true);
    }
    return;
  }
  for (int64_t h = 0; h < d.H; ++h) {
    const T* a = in[0].data + h * d.M * d.K;
    const int64_t b_off = d.b_stacked ? h * d.K * d.N : 0;
    const T* b = in[1].data + b_off;
    const T* dc = dy + h * d.M * d.N;
    if (T* da = din[0] ? din[0] + h * d.M * d.K : nullptr)
      for (int64_t i = 0; i < d.M; ++i)
        for (int64_t k = 0; k < d.K; ++k) {
          T s = 0;
          for (int64_t j = 0; j < d.N; ++j) s += dc[i * d.N + j] * b[k * d.N + j];
          da[i * d.K + k] += s;
        }
    if (T* db = din[1] ? din[1] + b_off : nullptr)
      for (int64_t k = 0; k < d.K; ++k)
        for (int64_t j = 0; j < d.N; ++j) {
          T s = 0;
          for (int64_t i = 0; i < d.M; ++i) s += a[i * d.K + k] * dc[i * d.N + j];
          db[k * d.N + j] += s;
        }
  }
}

// softmax: dx = y * (dy - <dy, y>); log_softmax: dx = dy - softmax * sum(dy), softmax = exp(y); per
// row of `cols`.
template <class T>
void softmax_adjoint(OpId op, int64_t rows, int64_t cols, const T* y, const T* dy, std::span<T* const> din) {
  if (!din[0]) return;
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* g = dy + r * cols;
    T* dx = din[0] + r * cols;
    if (op == OpId::Softmax) {  // dx = y * (dy - <dy, y>)
      T dot = 0;
      for (int64_t j = 0; j < cols; ++j) dot += g[j] * yr[j];
      for (int64_t j = 0; j < cols; ++j) dx[j] += yr[j] * (g[j] - dot);
    } else {  // dx = dy - softmax * sum(dy), softmax = exp(y)
      T sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += g[j];
      for (int64_t j = 0; j < cols; ++j) dx[j] += g[j] - std::exp(yr[j]) * sum;
    }
  }
}

// xhat = (x - mean) * rstd, y = xhat * gamma + beta: dgamma += dy * xhat, dbeta += dy,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; per row of `cols`.
template <class T>
void layer_norm_adjoint(std::span<const TensorArg<T>> in, int64_t rows, int64_t cols, const T* dy,
                        std::span<T* const> din) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in[0].data + r * cols;
    const T* g = dy + r * cols;
    T mean, rstd;
    row_stats(x, cols, mean, rstd);
    T mean_g = 0, mean_gx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const T xhat = (x[j] - mean) * rstd, gj = g[j] * in[1].data[j];
      mean_g += gj;
      mean_gx += gj * xhat;
      if (din[1]) din[1][j] += g[j] * xhat;
      if (din[2]) din[2][j] += g[j];
    }
    mean_g /= T(cols);
    mean_gx /= T(cols);
    if (din[0])
      for (int64_t j = 0; j < cols; ++j) {
        const T xhat = (x[j] - mean) * rstd;
        din[0][r * cols + j] += rstd * (g[j] * in[1].data[j] - mean_g - xhat * mean_gx);
      }
  }
}

// sum and mean along an axis spread dy over it (mean divided by its length); max sends it to the
// first maximal entry.
template <class T>
void reduce_adjoint(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in, const T* dy,
                    std::span<T* const> din) {
  if (!din[0]) return;
  const auto& s = in[0].shape;
  const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], s.size()));
  const int64_t outer = prod(s, 0, axis), len = s[axis], inner = prod(s, axis + 1, s.size());
  for (int64_t o = 0; o < outer; ++o) {
    const T* g = dy + o * inner;
    T* d = din[0] + o * len * inner;
    if (op == OpId::Max) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* x = in[0].data + o * len * inner + i;
        int64_t best = 0;  // the first maximal entry
        for (int64_t j = 1; j < len; ++j)
          if (x[j * inner] > x[best * inner]) best = j;
        d[best * inner + i] += g[i];
      }
      continue;
    }
    // Row by row along the axis, each row's entries in unit steps.
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < inner; ++i) d[j * inner + i] += op == OpId::Mean ? g[i] / T(len) : g[i];
  }
}

// The operators that only move data (concat, slice, transpose, heads, merge_heads): each element's
// adjoint goes back where it came from.
template <class T>
void movement_adjoint(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in,
                      std::span<const int64_t> out_shape, const T* dy, std::span<T* const> din) {
  switch (op) {
    case OpId::Concat: {
      const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], out_shape.size()));
      const int64_t outer = prod(out_shape, 0, axis), out_cols = prod(out_shape, axis, out_shape.size());
      int64_t offset = 0;
      for (size_t t = 0; t < in.size(); ++t) {
        const int64_t c = prod(in[t].shape, axis, in[t].shape.size());
        if (din[t])
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < c; ++j) din[t][o * c + j] += dy[o * out_cols + offset + j];
        offset += c;
      }
      return;
    }
    case OpId::Slice: {
      if (!din[0]) return;
      const auto& s = in[0].shape;
      const size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[2], s.size()));
      const int64_t inner = prod(s, axis + 1, s.size()), outer = prod(s, 0, axis);
      const int64_t begin = attrs.ints[0], width = (attrs.ints[1] - begin) * inner;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < width; ++j) din[0][o * s[axis] * inner + begin * inner + j] += dy[o * width + j];
      return;
    }
    case OpId::Transpose: {
      if (!din[0]) return;
      transpose_each(in[0].shape, [&](int64_t from, int64_t to) { din[0][from] += dy[to]; });
      return;
    }
    case OpId::Causal: {
      // The entries above each diagonal are constants.
      if (!din[0]) return;
      const int64_t cols = out_shape.back(), n = count(out_shape);
      for (int64_t r = 0; r < n / cols; ++r)
        for (int64_t j = 0; j <= r % cols; ++j) din[0][r * cols + j] += dy[r * cols + j];
      return;
    }
    case OpId::Heads:
    case OpId::MergeHeads: {
      if (!din[0]) return;
      const bool split = op == OpId::Heads;
      heads_each(split ? out_shape : in[0].shape, [&](int64_t flat, int64_t stacked) {
        if (split)
          din[0][flat] += dy[stacked];
        else
          din[0][stacked] += dy[flat];
      });
      return;
    }
    default: break;
  }
}

}  // namespace

template <class T>
void adjoint(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in, std::span<const int64_t> out_shape,
             const T* y, const T* dy, std::span<T* const> din) {
  const int64_t n = count(out_shape);
  const int64_t cols = out_shape.empty() ? 1 : out_shape.back();
  const int64_t rows = cols > 0 ? n / cols : 0;
  // Elementwise y = f(x): dx += dy * f'(x, y).
  auto unary = [&](auto dydx) {
    if (!din[0]) return;
    for (int64_t i = 0; i < n; ++i) din[0][i] += dy[i] * dydx(in[0].data[i], y[i]);
  };
  // y = f(a, b) broadcast: da += dy * df/da, db += dy * df/db (summed over broadcast dimensions).
  // A run with both operands along it (the common case) in loops of unit steps.
  auto binary = [&](auto dfa, auto dfb) {
    broadcast_runs(out_shape, in[0].shape, in[1].shape,
                   [&](int64_t i, int64_t ia, int64_t ib, int64_t len, int64_t sa, int64_t sb) {
                     const T* a = in[0].data + ia;
                     const T* b = in[1].data + ib;
                     const T* g = dy + i;
                     T* da = din[0] ? din[0] + ia : nullptr;
                     T* db = din[1] ? din[1] + ib : nullptr;
                     if (sa == 1 && sb == 1) {
                       if (da)
                         for (int64_t j = 0; j < len; ++j) da[j] += g[j] * dfa(a[j], b[j]);
                       if (db)
                         for (int64_t j = 0; j < len; ++j) db[j] += g[j] * dfb(a[j], b[j]);
                       return;
                     }
                     // An operand broadcast along the run (step 0, a scalar by a matrix) sums
                     // its adjoint in a register, in the same order.
                     if (sb == 0 && db && db != da) {
                       T sum = *db;
                       for (int64_t j = 0; j < len; ++j) {
                         const T x = a[j * sa], z = *b;
                         if (da) da[j * sa] += g[j] * dfa(x, z);
                         sum += g[j] * dfb(x, z);
                       }
                       *db = sum;
                       return;
                     }
                     if (sa == 0 && da && da != db) {
                       T sum = *da;
                       for (int64_t j = 0; j < len; ++j) {
                         const T x = *a, z = b[j * sb];
                         sum += g[j] * dfa(x, z);
                         if (db) db[j * sb] += g[j] * dfb(x, z);
                       }
                       *da = sum;
                       return;
                     }
                     for (int64_t j = 0; j < len; ++j) {
                       const T x = a[j * sa], z = b[j * sb];
                       if (da) da[j * sa] += g[j] * dfa(x, z);
                       if (db) db[j * sb] += g[j] * dfb(x, z);
                     }
                   });
  };
  switch (op) {
    case OpId::MatMul: return matmul_adjoint<T>(in, dy, din);
    case OpId::Add: return binary([](T, T) { return T(1); }, [](T, T) { return T(1); });
    case OpId::Sub: return binary([](T, T) { return T(1); }, [](T, T) { return T(-1); });
    case OpId::Mul: return binary([](T, T b) { return b; }, [](T a, T) { return a; });
    case OpId::Div: return binary([](T, T b) { return T(1) / b; }, [](T a, T b) { return -a / (b * b); });
    case OpId::Neg: return unary([](T, T) { return T(-1); });
    case OpId::Sigmoid: return unary([](T, T s) { return s * (T(1) - s); });
    case OpId::Tanh: return unary([](T, T t) { return T(1) - t * t; });
    case OpId::Relu: return unary([](T x, T) { return x > 0 ? T(1) : T(0); });
    case OpId::Exp: return unary([](T, T e) { return e; });
    case OpId::Log: return unary([](T x, T) { return T(1) / x; });
    case OpId::Softmax:
    case OpId::LogSoftmax: return softmax_adjoint<T>(op, rows, cols, y, dy, din);
    case OpId::LayerNorm: return layer_norm_adjoint<T>(in, rows, cols, dy, din);
    case OpId::Sum:
    case OpId::Mean:
    case OpId::Max: return reduce_adjoint<T>(op, attrs, in, dy, din);
    case OpId::Concat:
    case OpId::Slice:
    case OpId::Transpose:
    case OpId::Heads:
    case OpId::MergeHeads:
    case OpId::Causal: return movement_adjoint<T>(op, attrs, in, out_shape, dy, din);
    case OpId::Zeros:
    case OpId::Ones:
    case OpId::Constant:
    case OpId::HostScalar:
    case OpId::Argmax:
    case OpId::Item:
    case OpId::Sample: break;
  }
  internal_error(__FILE__, __LINE__, std::string("adjoint of ") + op_info(op).name + ", which has none");
}

template void forward<float>(OpId, const OpAttrs&, std::span<const TensorArg<float>>, std::span<const int64_t>,
                             float*);
template void forward<double>(OpId, const OpAttrs&, std::span<const TensorArg<double>>, std::span<const int64_t>,
                              double*);
template void adjoint<float>(OpId, const OpAttrs&, std::span<const TensorArg<float>>, std::span<const int64_t>,
                             const float*, const float*, std::span<float* const>);
template void adjoint<double>(OpId, const OpAttrs&, std::span<const TensorArg<double>>, std::span<const int64_t>,
                              const double*, const double*, std::span<double* const>);

}  // namespace acrobat
