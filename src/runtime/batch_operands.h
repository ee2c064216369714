// The operands of a batch, for every batched engine: how the B values of one block argument are read
// (one shared tensor, rows adjacent at a fixed stride read in place, or rows scattered over memory
// read through a pointer array), and the library's batched kernels run on such operands (the
// interpreted block executor's operators, and the compiled kernels' operators they leave to the
// runtime).
#pragma once

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "acrobat/aot.h"
#include "analysis/blocks.h"
#include "runtime/arena.h"
#include "runtime/batched_kernels.h"
#include "runtime/params.h"

namespace acrobat {

// Parameters prepared for GEMM, found by the address of their data (a whole parameter, or one
// matrix of an indexed parameter).
class PackedIndex {
 public:
  explicit PackedIndex(const ParamStore& params);
  const kernels::PackedWeights* find(const float* data) const {
    auto it = packed_.find(data);
    return it == packed_.end() ? nullptr : it->second;
  }

 private:
  absl::flat_hash_map<const float*, const kernels::PackedWeights*> packed_;
};

// Instance b's tensor of operand `x`.
inline const float* operand_row(const aot::Operand& x, int64_t b) {
  return x.data ? x.data + b * x.stride : x.rows[b];
}

// The operand for B values of `n` floats each, instance b's at rows[b] (kept alive by the caller
// when scattered): shared (stride 0, with its packed weights if it has some), strided in place, or
// scattered.
aot::Operand classify_operand(const float* const* rows, int64_t B, int64_t n,
                              const PackedIndex& packed);

// Instances [b0, ...) of `x`.
inline aot::Operand slice_operand(aot::Operand x, int64_t b0) {
  if (x.data) x.data += b0 * x.stride;
  else if (x.rows) x.rows += b0;
  return x;
}

// How a library kernel reads an operand.
enum class OperandRead {
  Strided,    // at any stride, 0 (one tensor shared by all instances) included
  Rows,       // scattered rows where they lie (kernels that say so: concat)
  GemmPanel,  // the left operand of a GEMM: instances at least one tensor apart
};
// `x` (per-instance shape `shape`) as the library kernels read it; scattered rows (and, for a GEMM
// panel, instances that share or overlap their tensor) are gathered into a panel in `scratch`.
BatchOperand library_operand(const aot::Operand& x, const std::vector<int64_t>& shape, int64_t B,
                             Arena& scratch, OperandRead read = OperandRead::Strided);

// Operator `k` of block `s` on instances [0, B) of the operands `in` (one per operator operand),
// into the contiguous [B, size] `out`, with the registry's batched kernels: scattered rows are
// gathered into `scratch` first (concat reads them where they lie), and a matmul whose weights
// differ between instances runs one GEMM per matrix (batched_matmul_grouped). Returns the kernel
// launches made. `pieces` >= 0: operator k is a matmul reading concat `pieces` in pieces
// (KernelPlan::concat_pieces), and `in` holds its left operand and then the concat's operands.
int64_t run_library_op(const analysis::StaticBlock& s, size_t k, int64_t B, const aot::Operand* in,
                       float* out, Arena& scratch, const PackedIndex& packed, int pieces = -1);

}  // namespace acrobat
