// Reverse mode for the operator registry (src/ops/ops.def): for every operator its value and its
// adjoint (vector-Jacobian product) as plain loops, generic over the scalar type. In float they are
// the reference backward pass (the gradient every batched backward must equal); in double they are
// what the finite-difference checks differentiate, so a rule is checked to ~1e-7 rather than to
// float's noise. The float forward of the engines (reference_kernels.cpp, the SIMD kernels) is
// checked against `forward<double>` by the same tests, so both describe one operator.
//
// Conventions follow PyTorch's autograd where a choice exists: max along an axis sends the gradient
// to the first maximal entry; relu's derivative at 0 is 0; broadcast operands receive the sum of
// the gradient over the dimensions they were broadcast along. Host reads (argmax, item) and
// constants have no adjoint: a decision taken from a tensor value is fixed by the forward run.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "acrobat/kernels.h"

#include "ops/ops.h"

namespace acrobat {

template <class T>
struct TensorArg {
  std::span<const int64_t> shape;
  const T* data = nullptr;
};

// Whether the operator passes gradients to its tensor operands.
bool differentiable(OpId op);

// What an operator's adjoint reads besides dy: its operands' values, its own value y (shapes and
// attributes it always reads).
struct AdjointReads {
  bool operands = true, value = true;
};
AdjointReads adjoint_reads(OpId op);

// The SIMD kernel of an elementwise operator's adjoint (dy * f'(x or y)), for relu, tanh, sigmoid and
// exp; nothing for the others. The batched backward takes it, and kernels::layer_norm_backward, where
// an operator runs over stacked rows: the same products as adjoint<float> below, to rounding.
std::optional<kernels::UnaryBackward> unary_backward_kernel(OpId op);

// out = op(in...), `out_shape` being the shape the type checker derived (sizes bound).
template <class T>
void forward(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in, std::span<const int64_t> out_shape,
             T* out);

// For y = op(in...) and dy = dL/dy (both of `out_shape`): adds dL/d(in[i]) to din[i], each of in[i]'s
// shape; a null din[i] is not wanted. Only for differentiable operators.
template <class T>
void adjoint(OpId op, const OpAttrs& attrs, std::span<const TensorArg<T>> in, std::span<const int64_t> out_shape,
             const T* y, const T* dy, std::span<T* const> din);

extern template void forward<float>(OpId, const OpAttrs&, std::span<const TensorArg<float>>,
                                    std::span<const int64_t>, float*);
extern template void forward<double>(OpId, const OpAttrs&, std::span<const TensorArg<double>>,
                                     std::span<const int64_t>, double*);
extern template void adjoint<float>(OpId, const OpAttrs&, std::span<const TensorArg<float>>,
                                    std::span<const int64_t>, const float*, const float*, std::span<float* const>);
extern template void adjoint<double>(OpId, const OpAttrs&, std::span<const TensorArg<double>>,
                                     std::span<const int64_t>, const double*, const double*,
                                     std::span<double* const>);

}  // namespace acrobat
