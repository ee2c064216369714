#include "runtime/reference_kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "acrobat/kernels.h"
#include "kernels/vec_math.h"

namespace acrobat {

namespace {

namespace k = kernels;

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

void kernel_MatMul(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const int K = static_cast<int>(a.shape.back()), N = static_cast<int>(b.shape.back());
  if (b.shape.size() == 2) {
    // [M, K] @ [K, N], or a stack [H, M, K] @ [K, N] as one [H * M, K] panel.
    const int M = static_cast<int>(a.size() / K);
    if (b.packed)
      k::gemm_packed(M, a.data.get(), K, *b.packed, out.data.get(), N, false);
    else
      k::gemm(M, N, K, a.data.get(), K, b.data.get(), N, out.data.get(), N, false);
    return;
  }
  const int64_t H = a.shape[0];
  const int M = static_cast<int>(a.shape[1]);
  for (int64_t h = 0; h < H; ++h)
    k::gemm(M, N, K, a.data.get() + h * M * K, K, b.data.get() + h * K * N, N,
            out.data.get() + h * M * N, N, false);
}

void binary(k::BinaryOp op, std::span<const Tensor* const> in, Tensor& out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  if (a.shape == b.shape) {
    k::binary(op, a.data.get(), b.data.get(), out.data.get(), static_cast<size_t>(out.size()));
    return;
  }
  // Right-aligned broadcasting strides: 0 where an operand has size 1 (or lacks the dimension).
  size_t rank = out.shape.size();
  std::vector<int64_t> as(rank, 0), bs(rank, 0);
  auto strides = [rank](const std::vector<int64_t>& shape, std::vector<int64_t>& st) {
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      st[rank - shape.size() + i] = shape[i] == 1 ? 0 : stride;
      stride *= shape[i];
    }
  };
  strides(a.shape, as);
  strides(b.shape, bs);
  k::binary_broadcast(op, static_cast<int>(rank), out.shape.data(), a.data.get(), as.data(),
                      b.data.get(), bs.data(), out.data.get());
}
void kernel_Add(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  binary(k::BinaryOp::Add, in, out);
}
void kernel_Sub(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  binary(k::BinaryOp::Sub, in, out);
}
void kernel_Mul(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  binary(k::BinaryOp::Mul, in, out);
}
void kernel_Div(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  binary(k::BinaryOp::Div, in, out);
}

#define ACROBAT_UNARY_KERNEL(id, fn)                                                     \
  void kernel_##id(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {    \
    k::fn(in[0]->data.get(), out.data.get(), static_cast<size_t>(out.size()));          \
  }
ACROBAT_UNARY_KERNEL(Neg, neg)
ACROBAT_UNARY_KERNEL(Sigmoid, sigmoid)
ACROBAT_UNARY_KERNEL(Tanh, tanh)
ACROBAT_UNARY_KERNEL(Relu, relu)
ACROBAT_UNARY_KERNEL(Exp, exp)
ACROBAT_UNARY_KERNEL(Log, log)
#undef ACROBAT_UNARY_KERNEL

void kernel_Softmax(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  int cols = static_cast<int>(out.shape.back());
  k::softmax(in[0]->data.get(), out.data.get(), static_cast<int>(out.size() / cols), cols);
}
void kernel_LogSoftmax(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  int cols = static_cast<int>(out.shape.back());
  k::log_softmax(in[0]->data.get(), out.data.get(), static_cast<int>(out.size() / cols), cols);
}
void kernel_LayerNorm(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  int cols = static_cast<int>(out.shape.back());
  k::layer_norm(in[0]->data.get(), in[1]->data.get(), in[2]->data.get(), k::kLayerNormEps, out.data.get(),
                static_cast<int>(out.size() / cols), cols);
}

void reduce(k::ReduceOp op, const OpAttrs& attrs, std::span<const Tensor* const> in, Tensor& out) {
  const auto& s = in[0]->shape;
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], s.size()));
  k::reduce(op, in[0]->data.get(), out.data.get(), prod(s, 0, axis), s[axis],
            prod(s, axis + 1, s.size()));
}
void kernel_Sum(const OpAttrs& a, std::span<const Tensor* const> in, Tensor& out) {
  reduce(k::ReduceOp::Sum, a, in, out);
}
void kernel_Mean(const OpAttrs& a, std::span<const Tensor* const> in, Tensor& out) {
  reduce(k::ReduceOp::Mean, a, in, out);
}
void kernel_Max(const OpAttrs& a, std::span<const Tensor* const> in, Tensor& out) {
  reduce(k::ReduceOp::Max, a, in, out);
}

void kernel_Concat(const OpAttrs& attrs, std::span<const Tensor* const> in, Tensor& out) {
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[0], out.shape.size()));
  int64_t outer = prod(out.shape, 0, axis);
  int64_t out_cols = prod(out.shape, axis, out.shape.size());
  int64_t offset = 0;
  for (const Tensor* t : in) {
    int64_t cols = prod(t->shape, axis, t->shape.size());
    k::copy_2d(t->data.get(), cols, out.data.get() + offset, out_cols, outer, cols);
    offset += cols;
  }
}

void kernel_Slice(const OpAttrs& attrs, std::span<const Tensor* const> in, Tensor& out) {
  const auto& s = in[0]->shape;
  size_t axis = static_cast<size_t>(normalize_axis(attrs.ints[2], s.size()));
  int64_t inner = prod(s, axis + 1, s.size());
  int64_t begin = attrs.ints[0], end = attrs.ints[1];
  k::copy_2d(in[0]->data.get() + begin * inner, s[axis] * inner, out.data.get(),
             (end - begin) * inner, prod(s, 0, axis), (end - begin) * inner);
}

void kernel_Transpose(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  const auto& s = in[0]->shape;
  const int64_t rows = s[s.size() - 2], cols = s.back(), n = rows * cols;
  for (int64_t h = 0; h < in[0]->size() / n; ++h)
    k::transpose_2d(in[0]->data.get() + h * n, out.data.get() + h * n, rows, cols);
}

// [M, H * E] -> [H, M, E]: head h is columns [h * E, (h + 1) * E) of every row.
void kernel_Heads(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  const int64_t H = out.shape[0], M = out.shape[1], E = out.shape[2];
  for (int64_t h = 0; h < H; ++h)
    k::copy_2d(in[0]->data.get() + h * E, H * E, out.data.get() + h * M * E, E, M, E);
}

// [H, M, E] -> [M, H * E], the inverse of heads.
void kernel_MergeHeads(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  const int64_t H = in[0]->shape[0], M = in[0]->shape[1], E = in[0]->shape[2];
  for (int64_t h = 0; h < H; ++h)
    k::copy_2d(in[0]->data.get() + h * M * E, E, out.data.get() + h * E, H * E, M, E);
}

void kernel_Causal(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  const int64_t n = out.shape.back(), matrices = out.size() / (n * n);
  const float* x = in[0]->data.get();
  float* y = out.data.get();
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < n; ++i, x += n, y += n) {
      std::copy_n(x, i + 1, y);
      std::fill(y + i + 1, y + n, -std::numeric_limits<float>::infinity());
    }
}

void kernel_Zeros(const OpAttrs&, std::span<const Tensor* const>, Tensor& out) {
  std::fill_n(out.data.get(), out.size(), 0.0f);
}
void kernel_Ones(const OpAttrs&, std::span<const Tensor* const>, Tensor& out) {
  std::fill_n(out.data.get(), out.size(), 1.0f);
}
void kernel_Constant(const OpAttrs& attrs, std::span<const Tensor* const>, Tensor& out) {
  std::fill_n(out.data.get(), out.size(), static_cast<float>(attrs.value));
}
void kernel_HostScalar(const OpAttrs& attrs, std::span<const Tensor* const>, Tensor& out) {
  std::fill_n(out.data.get(), out.size(), static_cast<float>(std::bit_cast<double>(attrs.ints[0])));
}

void kernel_Argmax(const OpAttrs& attrs, std::span<const Tensor* const> in, Tensor& out) {
  const int64_t rank = attrs.ints[0];
  out.data[0] = static_cast<float>(rank == 0 ? k::argmax(in[0]->data.get(), in[0]->size())
                                             : k::ranked_argmax(in[0]->data.get(), in[0]->size(), rank));
}
void kernel_Sample(const OpAttrs& attrs, std::span<const Tensor* const> in, Tensor& out) {
  out.data[0] = static_cast<float>(k::sample_scalar(in[0]->data.get(), in[0]->size(), attrs.ints[0]));
}
void kernel_Item(const OpAttrs&, std::span<const Tensor* const> in, Tensor& out) {
  out.data[0] = in[0]->data[0];
}

constexpr std::array<ReferenceKernel, kNumOps> kKernels = {
#define ACROBAT_OP(id, name, arity, attrs, cls, simd, adjoint) &kernel_##id,
#include "ops/ops.def"
#undef ACROBAT_OP
};
// Expanded from the rows of ops.def, so one entry per operator; a row without its kernel_<Id> does
// not compile, and an entry left out of a hand-edited table would be null:
static_assert(std::ranges::none_of(kKernels, [](auto k) { return k == nullptr; }), "a registry operator without a kernel");

}  // namespace

ReferenceKernel reference_kernel(OpId op) { return kKernels[static_cast<size_t>(op)]; }

Tensor constant_value(const ir::Rhs& r) {
  ACROBAT_ASSERT(r.kind == ir::RhsKind::Op && r.args.empty() &&
                     op_info(r.op).op_class == OpClass::Constant,
                 "not a constant operator");
  Tensor t = Tensor::allocate(r.type->shape);
  reference_kernel(r.op)(r.attrs, {}, t);
  return t;
}

}  // namespace acrobat
