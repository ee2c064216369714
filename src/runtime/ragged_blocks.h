// The block executor of ragged static blocks (analysis/ragged_plan.h), shared by both batched
// engines: the graph runtime hands it a piece of a batch whose instances have different shapes,
// and it runs the block's plan over the instances' packed values. A matmul by shared weights is one
// GEMM over every instance's rows; per-instance products are one GEMM per instance and matrix;
// elementwise and row-wise operators run over the packed rows; views cost nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/plan.h"
#include "runtime/arena.h"
#include "runtime/batch_operands.h"
#include "runtime/run_stats.h"

namespace acrobat {

// Instances [0, B) of one ragged block, as the graph hands them over.
struct RaggedCall {
  const analysis::StaticBlock* block;
  int64_t B;
  // Instance b's values of the block's size variables (StaticBlock::sizes): sizes[b * S + i].
  const int64_t* sizes;
  // Argument e of instance b (a packed tensor of its shape): args[e * arg_stride + b].
  const float* const* args;
  int64_t arg_stride;
  // Per operator: the packed values of escaping operators for these instances (instance after
  // instance, each ragged_elements() floats), and of the others a run keeps for the backward pass
  // (analysis::stores_own_value), null for the rest.
  float* const* outputs;
  // Append operators whose values lie in growing storage (batch_outputs.h), instance by instance:
  // instance b's value of operator k at grown[k * grown_stride + b] (null: packed in `outputs` as
  // any other), and grown_in_place at the same index 1 when its first operand already lies
  // there, so that only the rest is written. Null when no operator of the block grows.
  float* const* grown;
  const uint8_t* grown_in_place;
  int64_t grown_stride;
  Arena* scratch;          // reset by the caller
  KernelCounters* counters;  // kernel launches, useful FLOPs, weight GEMMs and appends, added to
};

class RaggedBlocks {
 public:
  RaggedBlocks(const analysis::Plan& plan, const PackedIndex& packed) : plan_(plan), packed_(packed) {}
  void run(const RaggedCall& call) const;

 private:
  const analysis::Plan& plan_;
  const PackedIndex& packed_;
};

// The element count of operator k's value (or, with `arg`, argument k's) of block `s` for an
// instance whose size variables have the values `sizes`.
int64_t ragged_elements(const analysis::StaticBlock& s, size_t k, const int64_t* sizes, bool arg = false);
// The value of `dim` (a constant or a size variable of block `s`) for such an instance.
int64_t ragged_dim(const analysis::StaticBlock& s, int64_t dim, const int64_t* sizes);

}  // namespace acrobat
