#include "autodiff/batch_values.h"

#include "runtime/batch_operands.h"

namespace acrobat {

bool stackable(OpId id, const std::vector<int64_t>& shape, const OpAttrs& attrs,
               const std::vector<const BatchValue*>& in) {
  const size_t rank = shape.size();
  if (rank < 2 || shape[0] != 1) return false;
  for (const BatchValue* v : in)
    if (!v->shared && (v->shape.size() != rank || v->shape[0] != 1)) return false;
  auto axis_ok = [&](int64_t axis) { return normalize_axis(axis, rank) != 0; };
  switch (op_info(id).op_class) {
    case OpClass::Elementwise:
      // A shared operand broadcasts along the stack: it must be a row too (or have lower rank).
      for (const BatchValue* v : in)
        if (v->shared && v->shape.size() == rank && v->shape[0] != 1) return false;
      return true;
    case OpClass::RowWise:  // layer_norm's gamma and beta: one for all
      for (size_t i = 1; i < in.size(); ++i)
        if (!in[i]->shared) return false;
      return !in[0]->shared;
    case OpClass::Reduce: return !in[0]->shared && axis_ok(attrs.ints[0]);
    case OpClass::Gemm: return !in[0]->shared && in[1]->shared && in[1]->shape.size() == 2;
    case OpClass::DataMovement:
      if (id == OpId::Concat) {
        for (const BatchValue* v : in)
          if (v->shared) return false;
        return axis_ok(attrs.ints[0]);
      }
      if (id == OpId::Slice) return !in[0]->shared && axis_ok(attrs.ints[2]);
      return false;
    default: return false;
  }
}

std::vector<int64_t> stacked_shape(const BatchValue& v, int64_t B) {
  std::vector<int64_t> s = v.shape;
  if (!v.shared) s[0] = B;
  return s;
}

Tensor view(const PackedIndex& packed, const std::vector<int64_t>& shape, float* p) {
  Tensor t;
  t.shape = shape;
  t.data = Tensor::borrow(p);
  if (shape.size() == 2)
    if (const kernels::PackedWeights* w = packed.find(p))
      t.packed = std::shared_ptr<const kernels::PackedWeights>(std::shared_ptr<const kernels::PackedWeights>(), w);
  return t;
}

}  // namespace acrobat
