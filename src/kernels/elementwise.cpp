// Elementwise kernels: unary maps through simd::map, and binary ops on contiguous or broadcast
// operands with the broadcast loop reduced to a few contiguous inner kernels.
#include <cstdint>

#include "acrobat/kernels.h"
#include "kernels/simd.h"
#include "kernels/vec_math.h"
#include "support/diagnostics.h"

namespace acrobat::kernels {

void tanh(const float* x, float* y, size_t n) {
  simd::map(x, y, n, [](simd::Vec v) { return simd::tanh(v); });
}
void sigmoid(const float* x, float* y, size_t n) {
  simd::map(x, y, n, [](simd::Vec v) { return simd::sigmoid(v); });
}
void exp(const float* x, float* y, size_t n) {
  simd::map(x, y, n, [](simd::Vec v) { return simd::exp(v); });
}
void log(const float* x, float* y, size_t n) {
  simd::map(x, y, n, [](simd::Vec v) { return simd::log(v); });
}
void relu(const float* x, float* y, size_t n) {
  // Zero first: max returns its second operand for NaN, and relu(NaN) must stay NaN.
  simd::map(x, y, n, [](simd::Vec v) { return simd::max(simd::splat(0.0f), v); });
}
void neg(const float* x, float* y, size_t n) {
  simd::map(x, y, n, [](simd::Vec v) { return -v; });
}

namespace {

// dx = dy * f'(x or y), written or added; unit steps, so that the compiler vectorises it.
template <class D>
void unary_backward_as(D derivative, const float* x, const float* y, const float* dy, float* dx, size_t n,
                       bool accumulate) {
  if (accumulate)
    for (size_t i = 0; i < n; ++i) dx[i] += dy[i] * derivative(x[i], y[i]);
  else
    for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * derivative(x[i], y[i]);
}

}  // namespace

void unary_backward(UnaryBackward f, const float* x, const float* y, const float* dy, float* dx, size_t n,
                    bool accumulate) {
  // As autodiff/adjoints.cpp differentiates them (relu's derivative at 0 is 0).
  switch (f) {
    case UnaryBackward::Relu:
      return unary_backward_as([](float a, float) { return a > 0 ? 1.0f : 0.0f; }, x, x, dy, dx, n, accumulate);
    case UnaryBackward::Tanh:
      return unary_backward_as([](float, float t) { return 1.0f - t * t; }, y, y, dy, dx, n, accumulate);
    case UnaryBackward::Sigmoid:
      return unary_backward_as([](float, float s) { return s * (1.0f - s); }, y, y, dy, dx, n, accumulate);
    case UnaryBackward::Exp:
      return unary_backward_as([](float, float e) { return e; }, y, y, dy, dx, n, accumulate);
  }
}

namespace {

template <BinaryOp op>
inline float apply(float a, float b) {
  if constexpr (op == BinaryOp::Add) return a + b;
  if constexpr (op == BinaryOp::Sub) return a - b;
  if constexpr (op == BinaryOp::Mul) return a * b;
  if constexpr (op == BinaryOp::Div) return a / b;
}

// The inner loop of a broadcast, specialised for the stride patterns that occur in practice so that
// the compiler vectorises them: both operands contiguous, or one of them a scalar along this run.
template <BinaryOp op>
void binary_run(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = apply<op>(a[i], b[i]);
  } else if (sa == 0 && sb == 1) {
    const float s = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = apply<op>(s, b[i]);
  } else if (sa == 1 && sb == 0) {
    const float s = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = apply<op>(a[i], s);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = apply<op>(a[i * sa], b[i * sb]);
  }
}

// Dimensions [0, inner_dim) of a broadcast, visited by recursion so any rank works without scratch
// space. Each innermost visit is one run with the run strides. Returns the output position after
// the block.
struct Broadcast {
  const int64_t* dims;
  const int64_t* a_strides;
  const int64_t* b_strides;
  int inner_dim;
  int64_t run_len;
  int64_t run_a_stride;
  int64_t run_b_stride;
};

template <BinaryOp op>
float* broadcast_block(const Broadcast& bc, int dim, const float* a, const float* b, float* y) {
  if (dim == bc.inner_dim) {
    binary_run<op>(a, bc.run_a_stride, b, bc.run_b_stride, y, bc.run_len);
    return y + bc.run_len;
  }
  for (int64_t i = 0; i < bc.dims[dim]; ++i) {
    y = broadcast_block<op>(bc, dim + 1, a + i * bc.a_strides[dim], b + i * bc.b_strides[dim], y);
  }
  return y;
}

template <BinaryOp op>
void binary_broadcast_impl(int rank, const int64_t* dims, const float* a, const int64_t* a_strides,
                           const float* b, const int64_t* b_strides, float* y) {
  if (rank == 0) {
    *y = apply<op>(*a, *b);
    return;
  }
  // Fold trailing dimensions into one run while both operands step through them with a uniform
  // stride (the output always does): [64, 768] + [768] becomes 64 runs of 768, and contiguous
  // operands a single run. The run keeps the innermost dimension's strides.
  const int last = rank - 1;
  Broadcast bc{dims, a_strides, b_strides, last, dims[last], a_strides[last], b_strides[last]};
  auto folds = [&](const int64_t* strides, int d) {
    return dims[d] == 1 || strides[d] == strides[last] * bc.run_len;
  };
  while (bc.inner_dim > 0 && folds(a_strides, bc.inner_dim - 1) &&
         folds(b_strides, bc.inner_dim - 1)) {
    --bc.inner_dim;
    bc.run_len *= dims[bc.inner_dim];
  }
  broadcast_block<op>(bc, 0, a, b, y);
}

}  // namespace

void binary(BinaryOp op, const float* a, const float* b, float* y, size_t n) {
  const auto len = static_cast<int64_t>(n);
  switch (op) {
    case BinaryOp::Add: return binary_run<BinaryOp::Add>(a, 1, b, 1, y, len);
    case BinaryOp::Sub: return binary_run<BinaryOp::Sub>(a, 1, b, 1, y, len);
    case BinaryOp::Mul: return binary_run<BinaryOp::Mul>(a, 1, b, 1, y, len);
    case BinaryOp::Div: return binary_run<BinaryOp::Div>(a, 1, b, 1, y, len);
  }
  ACROBAT_ASSERT(false, "unknown BinaryOp");
}

void binary_broadcast(BinaryOp op, int rank, const int64_t* out_dims, const float* a,
                      const int64_t* a_strides, const float* b, const int64_t* b_strides,
                      float* y) {
  switch (op) {
    case BinaryOp::Add:
      return binary_broadcast_impl<BinaryOp::Add>(rank, out_dims, a, a_strides, b, b_strides, y);
    case BinaryOp::Sub:
      return binary_broadcast_impl<BinaryOp::Sub>(rank, out_dims, a, a_strides, b, b_strides, y);
    case BinaryOp::Mul:
      return binary_broadcast_impl<BinaryOp::Mul>(rank, out_dims, a, a_strides, b, b_strides, y);
    case BinaryOp::Div:
      return binary_broadcast_impl<BinaryOp::Div>(rank, out_dims, a, a_strides, b, b_strides, y);
  }
  ACROBAT_ASSERT(false, "unknown BinaryOp");
}

}  // namespace acrobat::kernels
