// The kernel plan of a static block: how one batched call computes it, decided once, as data, for
// every block executor. The code generator prints it as C++ (codegen/emit_kernels.cpp), the
// interpreter executes it step by step (runtime/interpreted_blocks.cpp), `acrobat explain` shows
// it, and tests check it without compiling anything.
//
// Decisions, per block:
//  - Storage. Each operator's per-instance value lies in an argument or in a buffer owned by an
//    operator: a fused bias add shares its matmul's buffer, a view points into its operand's. An
//    owner whose alias group escapes writes straight into that output; the rest get scratch.
//  - Fusion. Runs of elementwise operators of one size whose operands are the operator's shape, a
//    single number, or one row [1, N] broadcast down the result (N a whole number of vectors) form
//    one loop over each instance's elements; views in between do not break a run. Only what is read
//    outside its group, or escapes, is stored.
//  - Deferred bias. A bias add fused into a [1, N] matmul whose results (through views) are read only
//    by fused loops is left to those loops: each adds the bias as it loads.
//  - Concat read in pieces. A matmul whose right operand is a concat along rows (axis 0) that nothing
//    else reads (MV-RNN's `WM @ concat(A, B, axis=0)`) reads the concat's operands where they lie,
//    one product per operand accumulating into its result (K split at the operands' rows); the
//    concat's own step then runs only in a run that keeps its value for the backward pass. The
//    concat would write every instance's operands once more and the products read that copy: on
//    MV-RNN at batch 64, AOT, one thread, the kernels took 8% (H 64) and 3% (H 128) less time in
//    pieces (medians of six alternating pairs, Intel Xeon family 6 model 207).
//  - Steps, in order: fused loops, GEMMs on reuse or indexed weights (packed when the batch shares
//    one matrix), library operators (everything else), and copies of escaping views to their output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/blocks.h"

namespace acrobat::analysis {

// Where an operator's per-instance value lies while the kernel runs: argument `index`, or the buffer
// of operator `index` (instance b at buffer + b * stride + offset).
struct ValueLoc {
  bool arg = false;
  int index = 0;
  int64_t stride = 0, offset = 0;
  // The value of a matmul whose bias add is deferred: readers add row `bias_offset..` of argument
  // `bias` to what they load.
  int bias = -1;
  int64_t bias_offset = 0;
};

// How a fused loop reads one operand.
enum class FusedLoad {
  Register,      // the value of an earlier operator of the same loop
  Full,          // the operand's elements, aligned with the result's
  FullPlusBias,  // the same, plus a deferred bias row
  Splat,         // a single number
  RowBroadcast,  // one row [1, N] repeated down the result's rows
};

enum class StepKind {
  Fused,     // operators [begin, end) of one fusion group (views in between skipped)
  Gemm,      // operator `begin`: a matmul by reuse or indexed weights
  Library,   // operator `begin` through the operator library
  CopyView,  // operator `begin`: an escaping view copied to its output
};

struct KernelStep {
  StepKind kind;
  int begin, end;
  int64_t size = 0;       // Fused: elements per instance
  bool add_bias = false;  // Gemm, Library: the operator's fused bias add is done here
  // Fused: the operands the loop reads from memory (every load but Register), each once, in the
  // order of first reading: the operands of the loop's generated adjoint (aot::AdjointCall).
  std::vector<BlockOperand> inputs = {};
};

struct KernelPlan {
  std::vector<ValueLoc> loc;    // per operator
  std::vector<int> owner;       // per operator: whose buffer holds its value
  std::vector<int> group;       // per operator: its fusion group, -1 outside any
  std::vector<bool> stored;     // per owner: needs a buffer
  std::vector<int> buffer_slot; // per stored owner: the escaping output that is its buffer, or -1
                                // for scratch
  std::vector<bool> deferred_bias;          // per matmul with a fused bias
  // Per operator: for a matmul reading a concat in pieces (above), that concat's index, else -1.
  std::vector<int> concat_pieces;
  // Per operator: a concat read in pieces, whose step runs only when the run keeps its value.
  std::vector<bool> only_when_kept;
  std::vector<std::vector<FusedLoad>> loads;  // per fused operator, per operand
  std::vector<KernelStep> steps;
};

// A fused loop's operand shapes allow a row broadcast when rows are whole vectors of this many
// floats (the widest register simd.h may use), so that a row's vectors line up with the result's.
inline constexpr int64_t kMaxLanes = 16;

KernelPlan plan_kernel(const StaticBlock& s);

// Whether operator i owns a scratch buffer (stored, not an escaping output). A run that keeps its
// values for the backward pass gives such a buffer a batch output of its own (BatchCall::outputs[i]),
// which the kernel then writes instead of scratch.
inline bool owns_scratch(const KernelPlan& k, size_t i) {
  return k.owner[i] == static_cast<int>(i) && k.stored[i] && k.buffer_slot[i] < 0;
}

// Human-readable listing of a plan, one step per line (`acrobat explain`, golden tests).
std::string kernel_plan_str(const StaticBlock& s, const KernelPlan& k);

}  // namespace acrobat::analysis
