// One batched kernel per registry operator (src/ir/ops.def): it computes the operator for B instances
// in one call. Each operand is B per-instance tensors at a fixed stride: stride 0 means every
// instance uses the same tensor (a shared parameter: `reuse`), otherwise the instances' tensors lie
// `stride` floats apart (the engine gathers scattered rows into such a panel first). The output is
// one contiguous [B, ...] block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/ops.h"
#include "runtime/arena.h"

namespace acrobat::kernels {
class PackedWeights;
}

namespace acrobat {

struct BatchOperand {
  const float* data = nullptr;
  int64_t stride = 0;                                  // floats between instances; 0: shared
  const std::vector<int64_t>* shape = nullptr;         // per-instance shape
  const kernels::PackedWeights* packed = nullptr;      // shared matrix prepared for GEMM, if any
  // Scattered instances read where they lie (instance b at rows[b]) instead of from a gathered
  // panel; only the kernels that say so accept it (concat), and then `data` is unused.
  const float* const* rows = nullptr;
};

using BatchedKernel = void (*)(const OpAttrs& attrs, int64_t batch,
                               std::span<const BatchOperand> in,
                               const std::vector<int64_t>& out_shape, float* out);

BatchedKernel batched_kernel(OpId op);

// out[b] = a[b] @ w (+ out[b] when `accumulate`), for the matmul kernel and for a matmul whose bias
// the engine has already written into `out` (one pass fewer over the output).
void batched_matmul(int64_t batch, const BatchOperand& a, const BatchOperand& w,
                    const std::vector<int64_t>& out_shape, float* out, bool accumulate);

// out[b] = a[b] @ W_b where the W_b are scattered matrices (parameter slices chosen by a host int,
// or per-instance matrices): instances sharing a matrix form one GEMM over their gathered rows.
// `a` must not be `rows`-scattered. Returns the number of GEMM calls made.
int64_t batched_matmul_grouped(int64_t B, const BatchOperand& a, const float* const* weights,
                               const std::vector<int64_t>& out_shape, float* out, Arena& scratch);

}  // namespace acrobat
