// Reverse mode over an executed schedule: the gradients of a training run's losses, batch by batch
// in reverse order of execution, from what the forward run kept (runtime/forward_record.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "acrobat/aot.h"
#include "autodiff/gradients.h"
#include "autodiff/weight_products.h"
#include "runtime/arena.h"
#include "runtime/batch_runner.h"
#include "runtime/forward_record.h"
#include "runtime/params.h"
#include "runtime/run_stats.h"
#include "runtime/thread_pool.h"

namespace acrobat {

class LeafRanges;

// One per graph that trains: its memory and the packed W^T are kept from call to call.
class ReverseMode {
 public:
  ReverseMode();
  ~ReverseMode();

  // Adds to `grads` (one per param of `params`, full shape) d(sum of the tensors `losses` refer
  // to)/d(param) over what `forward` ran, and to each of `inputs` the same with respect to its
  // memory; counters go to `stats`, whose peak_bytes then counts the backward's memory too (not
  // `grads`). `pool` (optional) shares the pieces of the products by
  // weights, which are cut the same way whatever the threads, so the bits do not depend on it.
  // `written` (optional) gets the chunks of `grads` it adds to (engine.h, WrittenChunks).
  // `executor` (optional) gives the compiled adjoints of fused loops
  // (BlockExecutor::fused_adjoint).
  void backward(const ForwardRecord& forward, std::span<const aot::Val> losses, const ParamStore& params,
                std::vector<Tensor>& grads, RunStats& stats, ThreadPool* pool = nullptr,
                WrittenChunks* written = nullptr, const BlockExecutor* executor = nullptr,
                std::span<const InputLeaf> inputs = {});

 private:
  struct Batch;
  class Ragged;  // a ragged batch's steps (ragged_reverse.cpp)

  // Starts a call: no output has an adjoint yet, no product by weights has kept rows yet.
  void begin(const ForwardRecord& forward, const ParamStore& params, std::span<const InputLeaf> inputs,
             std::vector<Tensor>& grads, RunStats& stats, ThreadPool* pool, WrittenChunks* written,
             const BlockExecutor* executor);
  // Batch `b` (its nodes `ids` by row): run by run of an indexed param's matrix.
  void differentiate_batch(int b, const std::vector<int>& ids, Batch& batch);
  // Nodes ids[0, B) of ragged batch `b` of block `s`, their values laid one after another
  // (ragged_reverse.cpp).
  void differentiate_ragged(int b, const analysis::StaticBlock& s, const int* ids, int64_t B);
  // Steps 1 to 4 of the algorithm note (reverse_mode.cpp) on the instances `batch` holds.
  void differentiate(Batch& batch);
  // Step 1: which arguments every instance reads as one tensor.
  void share_arguments(Batch& batch);
  // The fused loops that compiled adjoints differentiate (step 3).
  void choose_compiled(Batch& batch);
  // The slices of stacked rows that only those loops read, read in place.
  void choose_in_place(Batch& batch, const std::vector<uint8_t>& shared);
  // The arguments that only those loops read, read where they lie.
  void find_direct(Batch& batch);
  // Step 1: the other arguments not shared, stacked.
  void stack_arguments(Batch& batch);
  // A direct argument as a compiled adjoint's operand, and where its adjoint is added.
  std::pair<aot::Operand, aot::AdjointTarget> direct_operand(Batch& batch, size_t e);
  // Step 2: the operators' values, as the forward kept them or recomputed.
  void compute_values(Batch& batch);
  // Step 3: the adjoints of the block's outputs.
  void seed_outputs(Batch& batch);
  // Step 3: the operators' adjoints, in reverse.
  void run_adjoints(Batch& batch);
  // The adjoint of operand `o`, zeroed when first reached.
  float* adjoint_of(Batch& batch, const analysis::BlockOperand& o);
  // The compiled adjoint of fused step `si`, unless no adjoint reached its operators.
  void run_compiled(Batch& batch, size_t si);
  // Operator k's adjoint by its rule (autodiff/adjoints.h): on the stack or instance by instance.
  void operator_adjoint(Batch& batch, size_t k);
  // An add's operand whose adjoint is the add's own, taken over rather than copied (or -1).
  int take_over_add(Batch& batch, size_t k);
  // Step 4: each argument's adjoint to where it came from.
  void send_arguments(Batch& batch);

  // Sends the adjoint `g` (n floats) of the tensor `v` refers to where it came from: a node output
  // row's adjoint, a param's or an input leaf's gradient, or the param rows a gather stacked; else
  // nowhere.
  void send(const aot::Val& v, const float* g, int64_t n);
  // Whether send(v, ...) sends anywhere: not for a constant or an input not asked for.
  bool receives(const aot::Val& v) const;
  // The gather whose rows hold `p`, or null.
  const Gather* gather_of(const float* p) const;
  // The gradient of leaf `leaf` (LeafRanges: a param, then the input leaves).
  float* leaf_gradient(int leaf) const;
  // Adds g[0, n) to elements [offset, offset + n) of leaf `leaf`'s gradient and marks them, after
  // the rows kept for a W there (weight_products.h, flush).
  void add_to_leaf(int leaf, int64_t offset, const float* g, int64_t n);
  // The adjoint of output `slot` of batch `batch`, zeroed when first reached.
  float* output_adjoint(int batch, int slot);
  // Where the adjoint of the lazy tensor `v` (a node's output row) is added.
  float* node_adjoint(const aot::Val& v);
  // Notes that elements [offset, offset + n) of leaf p's gradient are written (params only:
  // WrittenChunks).
  void mark(int p, int64_t offset, int64_t n);
  // `n` floats of the batch's values (written whole) or adjoints (`zero`: they accumulate).
  float* alloc(int64_t n, bool zero = false);
  // Operator k's value as the forward run stored it, or null.
  const float* kept_value(int b, const analysis::StaticBlock& s, size_t k, int64_t row0) const;
  // Operator k = X W on stacked rows X by a param's matrix W, when it is one (else false): dX now,
  // the rows of X and dY kept for dW.
  bool weight_product(Batch& batch, size_t k);
  // The same for X (x_elements floats, rows of x_columns) by the matrix of shape w_shape at w, the
  // product's adjoint at dy and X's at *dx (allocated here when null, then written, else added
  // to; no dX when dx is null: X is a constant); dW added now (`dw_now`: rows enough for one GEMM
  // to pay) or deferred.
  bool product_by_weights(const float* w, const std::vector<int64_t>& w_shape, const float* x, int64_t x_columns,
                          const float* dy, float** dx, int64_t x_elements, bool dw_now);
  // The call's peak memory into stats.peak_bytes.
  void count_memory();

  // Kept across calls.
  Arena grad_outputs_, grad_values_;  // the outputs' adjoints; one batch's values and adjoints
  WeightProducts products_;  // the packed W^T and the rows kept for dW

  // The call under way (begin()).
  const ForwardRecord* forward_ = nullptr;
  const analysis::Plan* plan_ = nullptr;
  std::unique_ptr<LeafRanges> ranges_;
  std::vector<Tensor>* grads_ = nullptr;
  std::span<const InputLeaf> inputs_;
  RunStats* stats_ = nullptr;
  ThreadPool* pool_ = nullptr;
  WrittenChunks* written_ = nullptr;
  const BlockExecutor* executor_ = nullptr;
  std::vector<std::vector<float*>> adjoints_;  // [batch][operator]: the outputs' adjoints, or none
  std::vector<const Gather*> gathers_;         // the run's, by address
};

}  // namespace acrobat
