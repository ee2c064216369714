// The plan of a ragged static block (blocks.h: one whose shapes have size variables, so that its
// instances' shapes differ): how one batched call computes it, decided once, as data, and executed
// by runtime/ragged_blocks.h for both batched engines. `acrobat explain` shows it.
//
// A batch's values of one operator are packed: instance after instance, each instance's elements
// row-major, so the rows of all instances form one panel (CoRa's storage, without padding).
//
// Decisions, per operator:
//  1. Views. A slice along the last axis of a matrix, `heads` of a matrix and `transpose` are
//     views (a pointer, a row stride, a stride between heads, a transposed flag) when every reader
//     can read a view: a per-instance matmul (its GEMMs take strides and transposes), a matmul by
//     shared weights (a row-strided matrix is a panel), another view, merge_heads. Decided from
//     the last operator back, so a view's readers are decided before it. An escaping view is
//     copied to its output.
//  2. Steps. A matmul by a reuse weight matrix is one GEMM over the rows of every instance
//     (GemmShared: M = the instances' rows together), with a bias add fused into it when blocks.h
//     fused one; by an indexed weight, one GEMM per run of instances with the same matrix
//     (GemmIndexed); otherwise one GEMM per instance and matrix of a stack (GemmPerInstance, the
//     variable-size batched GEMM of QK^T and A V). Elementwise operators and row-wise ones
//     (softmax, layer norm) run over the packed rows of all instances at once where the operands
//     allow, else instance by instance. Everything else runs instance by instance with the
//     reference kernels (PerInstance).
//  3. Checks. What the checker could not decide is checked per instance when the host program
//     records the block: the bounds of a slice of a size-variable axis, and a slice that ends at a
//     size variable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/blocks.h"

namespace acrobat::analysis {

enum class RaggedStep {
  View,             // no computation: a strided view of operand 0 (see RaggedView)
  GemmShared,       // matmul by one matrix for every instance
  GemmIndexed,      // matmul by a matrix of an indexed param chosen per instance
  GemmPerInstance,  // matmul of per-instance operands (stacks: one GEMM per matrix)
  Elementwise,      // over packed rows, with broadcasting
  RowWise,          // softmax, log_softmax, layer_norm along the last axis
  PerInstance,      // the reference kernel, instance by instance
  FusedBias,        // a bias add its matmul did (blocks.h): nothing to do
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

// The plan of ragged block `s` (an empty plan for any other block).
RaggedPlan plan_ragged(const StaticBlock& s);

// One line per operator (`acrobat explain`, tests).
std::string ragged_plan_str(const StaticBlock& s, const RaggedPlan& p);

}  // namespace acrobat::analysis
