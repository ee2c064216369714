// The plan of a ragged static block (blocks.h: one whose shapes have size variables, so that its
// instances' shapes differ): how one batched call computes it, decided once, as data, and executed
// by runtime/ragged_blocks.h for both batched engines. `acrobat explain` shows it.
//
// A batch's values of one operator are packed: instance after instance, each instance's elements
// row-major, so the rows of all instances form one panel (CoRa's storage, without padding).
//
// Decisions, per operator:
//  1. Views. A slice along the last axis of a matrix, `heads` of a matrix and `transpose` are
//     views (a pointer, a row stride, a stride between heads, a transposed flag): their readers
//     read them in place (a GEMM takes strides and transposes) or, where a kernel needs packed
//     data, copy them. Decided in program order: a column slice or heads of a transposed view is
//     no view. An escaping view is copied to its output.
//  2. Steps. A matmul by a reuse weight matrix is one GEMM over the rows of every instance
//     (GemmShared: M = the instances' rows together); by any other matrix of one fixed shape (an
//     indexed param's, or one per instance), one GEMM per run of instances with the same matrix
//     (GemmIndexed); otherwise one GEMM per instance and matrix of a stack (GemmPerInstance, the
//     variable-size batched GEMM of QK^T and A V). Elementwise operators and row-wise ones
//     (softmax, layer norm) run over the packed rows of all instances at once where the operands
//     allow, else instance by instance. Everything else runs instance by instance with the
//     reference kernels (PerInstance).
//  3. Fusion into a matmul, for a matmul read only by the operator fused (and not escaping), each
//     fused operator then an Alias of the matmul's value, which the matmul writes into the last
//     one's storage:
//     - by weights: `x + A @ W` and then `+ b` (a shared row), or `A @ W + b` alone: the GEMM
//       writes the product and x and the broadcast row b are added to it in one pass after (not
//       the GEMM accumulating onto them, which rounds each partial sum to a residual's magnitude);
//     - per instance: `S * c` (a scalar constant or param) scales the product as the GEMM's
//       transposed operand is copied; `merge_heads(S)` is written in the merged layout [n, H * E]
//       directly, head h at column h * E (no copy).
//  4. Elementwise fusion: a run of elementwise operators of one shape, each operand the value of an
//     earlier member (a register), a stored value of that shape, a shared scalar or a shared row
//     of the last axis's size, is one loop over the piece's rows (its packed values), operator by
//     operator over a row at a time with the SIMD expressions of ops.def; only what is read after
//     the group, or escapes, is stored.
//  6. Appends. A concat along axis 0 whose first operand is an argument of the block (a cache
//     growing by a row per decode step) is an Append: instance by instance, the operands copied
//     one after another. Where the runtime stores the result in growing storage
//     (runtime/batch_outputs.h) and the argument's value is the latest prefix of such a store,
//     the result is that store extended in place and only the new rows are written.
//  5. Checks. What the checker could not decide is checked per instance when the host program
//     records the block: the bounds of a slice of a size-variable axis, a slice that ends at a
//     size (within the axis) or begins at one (at least 0), and a length that is a size (n - 1:
//     at least 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/blocks.h"
#include "analysis/kernel_plan.h"

namespace acrobat::analysis {

enum class RaggedStep {
  View,             // no computation: a strided view of operand 0 (see RaggedView)
  GemmShared,       // matmul by one matrix for every instance
  GemmIndexed,      // matmul by a matrix of a fixed shape chosen per instance
  GemmPerInstance,  // matmul of per-instance operands (stacks: one GEMM per matrix)
  Fused,            // a member of a fused elementwise group (the first one runs the group)
  Elementwise,      // over packed rows, with broadcasting
  RowWise,          // softmax, log_softmax, layer_norm along the last axis
  PerInstance,      // the reference kernel, instance by instance
  Append,           // concat along axis 0 onto an argument: rows appended (6. above)
  Alias,            // computed by the matmul it is fused into (3. above)
};

enum class RaggedView {
  None,
  Columns,    // slice along the last axis of a matrix: a column offset, the same row stride
  Heads,      // heads(x, H) of a matrix [M, H * E]: head h at column h * E
  Transpose,  // the last two axes swapped
};

struct RaggedOpPlan {
  RaggedStep step = RaggedStep::PerInstance;
  RaggedView view = RaggedView::None;
  int alias = -1;  // Alias: the matmul whose value this is
  // A matmul: the operator whose storage it writes (itself unless operators are fused into it).
  int store = -1;
  // By weights: the product plus this operand (an earlier operator's or an argument's value of
  // the result's shape) and this argument's row, added after the GEMM.
  bool init = false;
  BlockOperand init_from{false, -1};
  int init_row = -1;
  // Per instance: the product scaled by this argument (a scalar), and written in merge_heads'
  // layout.
  int scale = -1;
  bool merged = false;
  // Fused: the group's first operator, how each operand is read (Register, Full, Splat or
  // RowBroadcast), and whether the value is stored (read outside the group, or escaping).
  int group = -1;
  std::vector<FusedLoad> loads;
  bool stored = true;
};
// Per instance, size `small` <= size `large` (each a constant or a size variable), or operator
// `op` fails with the message of its shape rule.
struct SizeCheck {
  int op;
  int64_t small, large;
};

struct RaggedPlan {
  std::vector<RaggedOpPlan> ops;  // per operator of the block
  std::vector<SizeCheck> checks;
};

// Whether operator k's storage holds its own value, packed, when the plan runs: a step that
// writes its value (not a view, not a fused member held in tiles only, not a matmul whose storage
// its fused addends finish), or the last operator fused into a matmul, whose value the storage
// holds. A run that keeps its values for the backward pass gives these a batch output each.
inline bool stores_own_value(const RaggedPlan& p, size_t k) {
  const RaggedOpPlan& o = p.ops[k];
  switch (o.step) {
    case RaggedStep::View: return false;
    case RaggedStep::Alias: return p.ops[static_cast<size_t>(o.alias)].store == static_cast<int>(k);
    case RaggedStep::Fused: return o.stored;
    default: return o.store < 0 || o.store == static_cast<int>(k);
  }
}

// The plan of ragged block `s` (an empty plan for any other block).
RaggedPlan plan_ragged(const StaticBlock& s);

// One line per operator (`acrobat explain`, tests).
std::string ragged_plan_str(const StaticBlock& s, const RaggedPlan& p);

}  // namespace acrobat::analysis
