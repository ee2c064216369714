// The values reverse mode differentiates a batch on (reverse_mode.cpp, ragged_reverse.cpp): one
// tensor for all instances or the instances' one after another, and which operators run once on
// the instances' values laid one after another.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/ops.h"
#include "runtime/value.h"

namespace acrobat {

class PackedIndex;

// A value of the batch being differentiated: one tensor for all instances (shared) or the
// instances' values one after another (stacked); `shape` is the per-instance shape.
struct BatchValue {
  bool shared = true;
  std::vector<int64_t> shape;
  float* data = nullptr;
  int64_t size = 0;  // per-instance elements
};

inline void add(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Whether operator `op` of per-instance result `shape` computes its stacked result by running once
// on the stacked operands: every stacked operand and the result are rows ([1, ...], rank >= 2, so
// that the stack is [B, ...]), and it does not act along the first axis.
bool stackable(OpId op, const std::vector<int64_t>& shape, const OpAttrs& attrs,
               const std::vector<const BatchValue*>& in);

// The shape a stacked value has as one tensor: the per-instance shape with B for its leading 1.
std::vector<int64_t> stacked_shape(const BatchValue& v, int64_t B);

// A tensor over `p` (not owned), with a weight's packed copy when it has one.
Tensor view(const PackedIndex& packed, const std::vector<int64_t>& shape, float* p);

}  // namespace acrobat
