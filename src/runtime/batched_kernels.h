// One batched kernel per registry operator (src/ops/ops.def): it computes the operator for B instances
// in one call. Each operand is B per-instance tensors at a fixed stride: stride 0 means every
// instance uses the same tensor (a shared parameter: `reuse`), otherwise the instances' tensors lie
// `stride` floats apart (the engine gathers scattered rows into such a panel first). The output is
// one contiguous [B, ...] block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/ops.h"
#include "runtime/arena.h"

namespace acrobat::kernels {
class PackedWeights;
}
namespace acrobat::analysis {
struct StaticBlock;
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
// or per-instance matrices); packed[b] (null, or null entries) is W_b prepared for GEMM. Instances
// sharing a matrix form one GEMM. The engines order a batch by its indexed weights, so each shared
// matrix is one run of adjacent instances: its rows of `a` and of `out` are then one panel each,
// read and written in place. Otherwise the instances sharing a matrix are gathered first. `a` must
// not be `rows`-scattered. Returns the number of GEMM calls made.
int64_t batched_matmul_grouped(int64_t B, const BatchOperand& a, const float* const* weights,
                               const kernels::PackedWeights* const* packed,
                               const std::vector<int64_t>& out_shape, float* out, Arena& scratch);

// The order in which to run the nodes of a batch so that instances picking the same matrix of an
// indexed parameter are adjacent: a stable sort of [0, B) by key[b] (the matrix's address).
// Returns an empty vector when they already are.
std::vector<int> order_by_weights(const std::vector<const float*>& key);

// The first argument of `s` that is a matrix of an indexed param read only as a matmul's right
// operand (what order_by_weights sorts a batch by), or -1.
int indexed_weight_arg(const analysis::StaticBlock& s);

// `ids`, a batch of `s`, in order_by_weights' order of the matrices the nodes pick for
// indexed_weight_arg(s) (weight(id, arg) is node id's matrix); empty when their order stands.
template <class Weight>
std::vector<int> ordered_by_indexed_weights(const analysis::StaticBlock& s, const std::vector<int>& ids,
                                            Weight&& weight) {
  const int e = indexed_weight_arg(s);
  if (e < 0 || ids.size() < 2) return {};
  std::vector<const float*> key(ids.size());
  for (size_t b = 0; b < ids.size(); ++b) key[b] = weight(ids[b], e);
  std::vector<int> out = order_by_weights(key);
  for (int& o : out) o = ids[static_cast<size_t>(o)];
  return out;
}

}  // namespace acrobat
