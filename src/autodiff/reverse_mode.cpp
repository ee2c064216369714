// Reverse mode on the executed schedule (ReverseMode, reverse_mode.h).
//
// The forward run kept every batch output and every value its kernels stored (reset with
// keep_outputs: runtime/forward_record.h). The batches run in reverse order of execution; a batch
// whose outputs received no adjoint is skipped. For one batch:
//  1. Its arguments as batch values: an argument whose instances all read one tensor (a reused
//     weight, a constant, a value every instance shares) is that tensor, shared; the others are
//     stacked, instance after instance ([B, ...] of the per-instance shape), except node outputs
//     that only compiled adjoints (step 3) read: those read each instance's where it lies. A batch
//     of one node shares only params (a stack of one reads the values its kernels kept, and its
//     products by weights join the deferred dW like any other's).
//  2. Its operators' values: those the forward kernels stored (GEMM results, escaping outputs,
//     values read across fused loops) as they lie; the rest (values of fused loops kept in
//     registers, strided views) recomputed from their operands. An operator whose per-instance
//     values are rows ([1, ...]) and that acts along the other axes runs once on the stack, as the
//     forward kernels do; any other runs instance by instance. An operator of shared values only is
//     shared.
//  3. The adjoints of the block's outputs (what the batches that read them added, and the loss
//     seeds) and then, operator by operator in reverse, the adjoints of their operands
//     (autodiff/adjoints.h). A fused loop of stacked operators that the block executor has a
//     compiled adjoint for (the AOT engine: BlockExecutor::fused_adjoint, aot::AdjointCall) is
//     differentiated by it in one pass instead: its values kept in registers are not recomputed in
//     step 2, slices of stacked rows that only such loops read are read, and get their adjoints,
//     in place, and so are the node outputs of step 1 that were not stacked: their adjoints are
//     added where the producing nodes' output adjoints lie (step 4 then has nothing to send for
//     them). On the stack the adjoint of a shared operand is summed over the instances by the
//     broadcast rule. A product X W of stacked rows by a param's matrix is special
//     (weight_products.h): dX = dY W^T on W^T packed once per call, and dW is deferred: its rows
//     of X and dY are kept in chunks of 256 rows, each chunk's X^T dY added to the gradient of W
//     once it is full (a GEMM of hundreds of rows instead of many of a few), by the pool's idle
//     workers while the backward goes on, the rest at the end.
//  4. Each argument's adjoint goes where the argument came from: a lazy value to the adjoint of
//     the producing node's output row, a row or whole tensor of a param to that param's gradient
//     at the same place, a part of an input tensor asked for (InputLeaf) to that input's gradient
//     likewise, rows a gather stacked (Graph::gathered) to the param rows they were copied from,
//     anything else (other inputs, constants) nowhere.
// A batch whose nodes pick different matrices of an indexed param (per-layer or per-child
// weights: the forward ordered it so that each matrix is a run of rows) is differentiated run by
// run, each matrix shared by its run, so that its products take the path above rather than
// stacking a matrix per instance.
// A ragged batch (shapes with size variables) keeps each value's instances one after another,
// each packed in its own shape, and runs steps 1 to 4 on that layout (ragged_reverse.cpp).
// Everything runs in an order fixed by the schedule, on the calling thread except the blocks of the
// products by weights (dX by 256 rows and 128 columns, with the copies of the rows kept for dW; dW
// by 512 x 512 and chunks of rows), which a pool's threads share; the blocks and chunks are cut the
// same way at any thread count, and a block's chunks are added in order: the same gradients, bit
// for bit, whatever the threads.
#include "autodiff/reverse_mode.h"

#include <algorithm>
#include <cstring>

#include "autodiff/adjoints.h"
#include "autodiff/batch_values.h"
#include "autodiff/leaf_ranges.h"
#include "runtime/batched_kernels.h"
#include "runtime/reference_kernels.h"

namespace acrobat {

// What differentiate() works on: instances ids[0, B) of batch b of block s, and what steps 1 to 4
// find for them. One per call, reused from batch to batch.
struct ReverseMode::Batch {
  int b = 0;
  const analysis::StaticBlock* s = nullptr;
  const int* ids = nullptr;
  int64_t B = 0;
  int64_t row0 = 0;     // the batch row of a static batch's first instance (all of it, or a run)
  const analysis::KernelPlan* kp = nullptr;
  std::vector<BatchValue> vals, args;
  // Per operator: the fused step whose compiled adjoint differentiates it, or -1; where a slice
  // read in place begins in its stacked row, or -1; whether its value was computed on the stack.
  std::vector<int> compiled;
  std::vector<int64_t> in_place;
  std::vector<uint8_t> stacked_op;
  // Per argument: read only by compiled adjoints where it lies (find_direct), and its instances'
  // places and their adjoints' when first needed.
  std::vector<uint8_t> direct;
  std::vector<std::vector<const float*>> direct_rows;
  std::vector<std::vector<float*>> direct_adjoints;
  std::vector<float*> dval, darg;  // the adjoints of the operators and of the arguments
  // The kernels' operands, reused from call to call.
  std::vector<Tensor> in_t;
  std::vector<const Tensor*> in_p;
  std::vector<TensorArg<float>> targs;
  std::vector<std::vector<int64_t>> tshapes;
  std::vector<float*> dins;
  std::vector<aot::Operand> fin, fout;
  std::vector<aot::AdjointTarget> fdin;

  const OpAttrs& attrs(size_t k) const { return s->ops[k].rhs->attrs; }
  BatchValue& operand(const analysis::BlockOperand& o) { return o.local ? vals[o.index] : args[o.index]; }
  float*& adjoint(const analysis::BlockOperand& o) { return o.local ? dval[o.index] : darg[o.index]; }
};

ReverseMode::ReverseMode() = default;
ReverseMode::~ReverseMode() = default;

void ReverseMode::backward(const ForwardRecord& forward, std::span<const aot::Val> losses, const ParamStore& params,
                           std::vector<Tensor>& grads, RunStats& stats, ThreadPool* pool, WrittenChunks* written,
                           const BlockExecutor* executor, std::span<const InputLeaf> inputs) {
  ACROBAT_ASSERT(forward.kept(), "backward needs the outputs of a run reset with keep_outputs");
  const std::vector<std::vector<int>> members = forward.nodes_by_row();
  begin(forward, params, inputs, grads, stats, pool, written, executor);
  // The pool's workers add dW's chunks from here to weight_gradients, or to an exception.
  struct StopSums {
    WeightProducts& p;
    ~StopSums() { p.stop(); }
  } stop_sums{products_};
  static constexpr float kOne = 1.0f;  // d(sum of the losses)/d(each loss)
  for (const aot::Val& loss : losses) send(loss, &kOne, 1);
  Batch x;
  for (size_t bi = members.size(); bi-- > 0;) {
    const int b = static_cast<int>(bi);
    if (!adjoints_[b].empty()) differentiate_batch(b, members[b], x);
  }
  count_memory();
  products_.weight_gradients(pool);
}

void ReverseMode::begin(const ForwardRecord& forward, const ParamStore& params, std::span<const InputLeaf> inputs,
                        std::vector<Tensor>& grads, RunStats& stats, ThreadPool* pool, WrittenChunks* written,
                        const BlockExecutor* executor) {
  forward_ = &forward;
  plan_ = &forward.plan();
  grads_ = &grads;
  inputs_ = inputs;
  stats_ = &stats;
  pool_ = pool;
  written_ = written;
  executor_ = executor;
  adjoints_.assign(forward.num_batches(), {});
  grad_outputs_.reset();
  grad_values_.reset();
  grad_values_.reset_peak();
  ranges_ = std::make_unique<LeafRanges>(params, inputs);
  if (written) {
    written->assign(grads.size(), {});
    for (size_t p = 0; p < grads.size(); ++p)
      (*written)[p].assign(size_t((grads[p].size() + kGradChunk - 1) / kGradChunk), uint8_t{0});
  }
  gathers_.clear();
  for (const Gather& g : forward.gathers()) gathers_.push_back(&g);
  std::sort(gathers_.begin(), gathers_.end(), [](const Gather* a, const Gather* b) { return a->out < b->out; });
  products_.begin(grads, pool);
}

float* ReverseMode::output_adjoint(int batch, int slot) {
  std::vector<float*>& per_op = adjoints_[batch];
  if (per_op.empty()) per_op.assign(plan_->blocks[forward_->block(batch)].ops.size(), nullptr);
  float*& a = per_op[slot];
  if (!a) {
    const size_t n = forward_->output_floats(batch, slot);
    a = grad_outputs_.alloc(n);
    std::fill_n(a, n, 0.0f);
  }
  return a;
}

float* ReverseMode::node_adjoint(const aot::Val& v) {
  const auto [batch, row] = forward_->place(v.node);
  return output_adjoint(batch, v.lazy.slot) + forward_->output_offset(batch, v.lazy.slot, row);
}

float* ReverseMode::leaf_gradient(int leaf) const {
  const size_t params = grads_->size();
  return size_t(leaf) < params ? (*grads_)[size_t(leaf)].data.get() : inputs_[size_t(leaf) - params].grad;
}

void ReverseMode::mark(int p, int64_t offset, int64_t n) {
  if (!written_ || n <= 0 || !ranges_->is_param(p)) return;
  std::vector<uint8_t>& w = (*written_)[size_t(p)];
  std::fill(w.begin() + offset / kGradChunk, w.begin() + (offset + n - 1) / kGradChunk + 1, uint8_t{1});
}

const Gather* ReverseMode::gather_of(const float* p) const {
  auto it = std::upper_bound(gathers_.begin(), gathers_.end(), p,
                             [](const float* q, const Gather* x) { return q < x->out; });
  if (it == gathers_.begin()) return nullptr;
  const Gather& x = **--it;
  return p - x.out < x.row * static_cast<int64_t>(x.count) ? &x : nullptr;
}

bool ReverseMode::receives(const aot::Val& v) const {
  return v.node >= 0 || ranges_->find(v.data).first >= 0 || gather_of(v.data);
}

void ReverseMode::add_to_leaf(int leaf, int64_t offset, const float* g, int64_t n) {
  products_.flush(leaf, offset, n, pool_);
  add(leaf_gradient(leaf) + offset, g, n);
  mark(leaf, offset, n);
}

void ReverseMode::send(const aot::Val& v, const float* g, int64_t n) {
  if (v.node >= 0) {
    add(node_adjoint(v), g, n);
    return;
  }
  const auto [leaf, offset] = ranges_->find(v.data);
  if (leaf >= 0) {
    add_to_leaf(leaf, offset, g, n);
    return;
  }
  // Rows a gather stacked: each row's adjoint to the row of the param it came from.
  const Gather* x = gather_of(v.data);
  if (!x) return;  // not in one: a constant (or an input not asked for)
  const int64_t at = v.data - x->out;
  for (int64_t i = 0; i < n;) {
    const int64_t k = (at + i) / x->row, in_row = (at + i) % x->row, len = std::min(n - i, x->row - in_row);
    const auto [p, o] = ranges_->find_param(forward_->gathered_row(x->begin + k));
    ACROBAT_ASSERT(p >= 0, "a gathered row comes from a param");  // Graph::gathered records param rows only
    add_to_leaf(p, o + in_row, g + i, len);
    i += len;
  }
}

// The batch's values (written whole by their producers) and adjoints (zeroed: they accumulate);
// the memory is reused from batch to batch and call to call.
float* ReverseMode::alloc(int64_t n, bool zero) {
  const size_t count = static_cast<size_t>(std::max<int64_t>(n, 1));
  float* p = grad_values_.alloc(count);
  if (zero) std::fill_n(p, count, 0.0f);
  return p;
}

// The value of operator k of batch b as the forward run left it ([B, size], rows in node order),
// or null where the kernel did not store it (fused into a loop, a strided view, a buffer that
// holds a matmul plus its bias, or a deferred bias not yet added).
// `row0`: the batch row of the first instance differentiated (a run of a batch, as
// differentiate_batch cuts them).
const float* ReverseMode::kept_value(int b, const analysis::StaticBlock& s, size_t k, int64_t row0) const {
  const analysis::KernelPlan& kp = plan_->kernels[s.id];
  const analysis::BlockOp& op = s.ops[k];
  // Rows from row0 of the output `slot` kept, or null where the forward kept no such output (a
  // value its fused loop held in registers only): null whatever row0, the offset is not added to it.
  auto rows = [&](int slot) -> const float* {
    const float* base = forward_->output(b, slot);
    return base ? base + row0 * op.size : nullptr;
  };
  if (op.view) return op.escapes ? rows(int(k)) : nullptr;  // an escaping view is copied out whole
  const analysis::ValueLoc& l = kp.loc[k];
  if (l.arg || l.bias >= 0 || l.stride != op.size || l.offset != 0) return nullptr;
  const int o = l.index;  // the owner of the buffer
  if (static_cast<int>(k) == o && op.bias_arg >= 0 && !kp.deferred_bias[k]) return nullptr;
  return rows(kp.buffer_slot[o] >= 0 ? kp.buffer_slot[o] : o);
}

// The adjoint of op k = X W on stacked rows X by W[K, N], a matrix of a param, when it is one.
bool ReverseMode::weight_product(Batch& batch, size_t k) {
  const analysis::BlockOp& op = batch.s->ops[k];
  const BatchValue& x = batch.operand(op.operands[0]);
  const BatchValue& w = batch.operand(op.operands[1]);
  if (op.rhs->op != OpId::MatMul || x.shared || !w.shared) return false;
  return product_by_weights(w.data, w.shape, x.data, x.shape.back(), batch.dval[k],
                            &batch.adjoint(op.operands[0]), batch.B * x.size, false);
}

bool ReverseMode::product_by_weights(const float* w, const std::vector<int64_t>& w_shape, const float* x,
                                     int64_t x_columns, const float* dy, float** dx, int64_t x_elements,
                                     bool dw_now) {
  if (w_shape.size() != 2) return false;
  const auto [param, offset] = ranges_->find_param(w);
  const int K = static_cast<int>(w_shape[0]), N = static_cast<int>(w_shape[1]);
  if (param < 0 || offset + int64_t(K) * N > (*grads_)[param].size() || x_columns != K) return false;
  const int64_t rows = x_elements / K;
  stats_->weight_products++;
  if (dx) {
    // Into fresh memory, then added to an adjoint X already has: a GEMM accumulating onto it
    // would round each partial sum to the adjoint's magnitude.
    float* const prior = *dx;
    *dx = alloc(rows * K);
    if (dw_now)
      products_.input_adjoint(w, K, N, dy, *dx, rows, pool_);
    else  // and the rows for dW kept meanwhile
      products_.input_adjoint_keeping(param, offset, w, K, N, x, dy, *dx, rows, pool_);
    if (prior) {
      kernels::binary(kernels::BinaryOp::Add, prior, *dx, prior, static_cast<size_t>(rows * K));
      *dx = prior;
    }
  }
  mark(param, offset, int64_t(K) * N);
  if (dw_now) {
    products_.flush(param, offset, int64_t(K) * N, pool_);
    products_.weight_gradient(*grads_, param, offset, K, N, x, dy, rows, pool_);
  } else if (!dx) {
    products_.keep_rows(param, offset, K, N, x, dy, rows);
  }
  return true;
}

void ReverseMode::differentiate_batch(int b, const std::vector<int>& ids, Batch& batch) {
  const analysis::StaticBlock& s = plan_->blocks[forward_->block(b)];
  // A matrix of an indexed param that the nodes pick (per-layer or per-child weights): each run of
  // nodes picking the same matrix (the forward ordered the batch so) is differentiated on its own,
  // the matrix shared by its nodes, so that its products take the weights' path (dX by one GEMM,
  // dW deferred) instead of one matrix per instance.
  const int e = indexed_weight_arg(s);
  size_t r0 = 0;
  for (size_t r1 = 1; r1 <= ids.size(); ++r1) {
    if (r1 < ids.size() && (e < 0 || forward_->data(forward_->arg(ids[r1], size_t(e))) ==
                                          forward_->data(forward_->arg(ids[r0], size_t(e)))))
      continue;
    if (s.ragged()) {
      differentiate_ragged(b, s, ids.data() + r0, static_cast<int64_t>(r1 - r0));
    } else {
      batch.b = b;
      batch.s = &s;
      batch.ids = ids.data() + r0;
      batch.B = static_cast<int64_t>(r1 - r0);
      differentiate(batch);
    }
    r0 = r1;
  }
}

void ReverseMode::differentiate(Batch& batch) {
  // The batch rows of a static batch's instances are consecutive from row0 (all of it, or a run).
  batch.row0 = forward_->row(batch.ids[0]);
  batch.kp = &plan_->kernels[batch.s->id];
  grad_values_.reset();
  share_arguments(batch);
  choose_compiled(batch);
  find_direct(batch);
  stack_arguments(batch);
  compute_values(batch);
  seed_outputs(batch);
  run_adjoints(batch);
  send_arguments(batch);
}

void ReverseMode::share_arguments(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const int* ids = batch.ids;
  const int64_t B = batch.B;
  batch.args.assign(s.args.size(), BatchValue{});
  for (size_t e = 0; e < s.args.size(); ++e) {
    BatchValue& a = batch.args[e];
    a.shape = s.args[e].shape;
    a.size = num_elements(a.shape);
    const float* first = forward_->data(forward_->arg(ids[0], e));
    // A batch of one node: a param's tensor is shared, anything else its own, so that a product
    // by weights takes the weights' path and the values its forward kernels kept are read.
    a.shared = B > 1 || ranges_->find_param(first).first >= 0;
    for (int64_t i = 1; i < B && a.shared; ++i) a.shared = forward_->data(forward_->arg(ids[i], e)) == first;
    if (a.shared) a.data = const_cast<float*>(first);
  }
}

// Fused loops differentiated by their compiled adjoints (per operator: its step, or -1): those
// whose operators are all stacked and whose values no view in their range reads.
void ReverseMode::choose_compiled(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  batch.compiled.assign(s.ops.size(), -1);
  batch.in_place.assign(s.ops.size(), -1);
  if (!executor_) return;
  std::vector<uint8_t> shared(s.ops.size(), 0);
  for (size_t k = 0; k < s.ops.size(); ++k) {
    bool all = true;
    for (const auto& o : s.ops[k].operands) all = all && (o.local ? shared[o.index] != 0 : batch.args[o.index].shared);
    shared[k] = all ? 1 : 0;
  }
  for (size_t si = 0; si < kp.steps.size(); ++si) {
    const analysis::KernelStep& st = kp.steps[si];
    if (st.kind != analysis::StepKind::Fused || !executor_->fused_adjoint(s, si)) continue;
    const int g = kp.group[st.begin];
    // The loop runs at its last operator; a view in its range before that one and reading its
    // values would get its adjoint too late (views after it are differentiated before it).
    int last = st.begin;
    for (int k = st.begin; k < st.end; ++k)
      if (kp.group[k] == g) last = k;
    bool ok = true;
    for (int k = st.begin; k < st.end && ok; ++k) {
      if (kp.group[k] == g) {
        ok = !shared[k];
        continue;
      }
      if (k < last)
        for (const auto& o : s.ops[k].operands) ok = ok && !(o.local && kp.group[o.index] == g);
    }
    for (int k = st.begin; k < st.end && ok; ++k)
      if (kp.group[k] == g) batch.compiled[k] = static_cast<int>(si);
  }
  choose_in_place(batch, shared);
}

// Slices of stacked rows ([1, N] per instance, along N) that only compiled adjoints read, as whole
// rows: the adjoint reads them inside the sliced rows and adds to the sliced value's adjoint in
// place, so that neither the slice nor its adjoint is copied. Per operator: where the slice begins
// in the row, or -1.
void ReverseMode::choose_in_place(Batch& batch, const std::vector<uint8_t>& shared) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  std::vector<uint8_t> read_whole(s.ops.size(), 0), read_otherwise(s.ops.size(), 0);
  for (size_t k = 0; k < s.ops.size(); ++k)
    for (size_t a = 0; a < s.ops[k].operands.size(); ++a) {
      const analysis::BlockOperand& o = s.ops[k].operands[a];
      if (!o.local) continue;
      const bool whole = batch.compiled[k] >= 0 && (kp.loads[k][a] == analysis::FusedLoad::Full ||
                                                    kp.loads[k][a] == analysis::FusedLoad::FullPlusBias);
      (whole ? read_whole : read_otherwise)[o.index] = 1;
    }
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const analysis::BlockOp& op = s.ops[k];
    if (op.rhs->op != OpId::Slice || op.escapes || !read_whole[k] || read_otherwise[k]) continue;
    const analysis::BlockOperand& base = op.operands[0];
    const std::vector<int64_t>& shape = base.local ? s.ops[base.index].shape : s.args[base.index].shape;
    const bool stacked = base.local ? !shared[base.index] : !batch.args[base.index].shared;
    if (stacked && shape.size() == 2 && shape[0] == 1 && normalize_axis(op.rhs->attrs.ints[2], 2) == 1)
      batch.in_place[k] = op.rhs->attrs.ints[0];
  }
}

// Arguments read only by compiled adjoints (whose values no operator computes here from them) and
// computed by the graph: the adjoints read each instance's where it lies and add to the adjoint of
// the node output it came from in place, so that it is neither stacked here nor sent in step 4.
void ReverseMode::find_direct(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  std::vector<uint8_t>& direct = batch.direct;
  direct.assign(s.args.size(), 0);
  batch.direct_rows.assign(s.args.size(), {});
  batch.direct_adjoints.assign(s.args.size(), {});
  if (!executor_) return;
  for (size_t e = 0; e < s.args.size(); ++e) {
    bool ok = !batch.args[e].shared;
    for (int64_t i = 0; i < batch.B && ok; ++i) ok = forward_->arg(batch.ids[i], e).node >= 0;
    direct[e] = ok ? 1 : 0;
  }
  for (size_t k = 0; k < s.ops.size(); ++k)
    for (const analysis::BlockOperand& o : s.ops[k].operands)
      if (!o.local && direct[o.index] &&
          !(batch.compiled[k] >= 0 && (!kp.stored[k] || kept_value(batch.b, s, k, batch.row0))))
        direct[o.index] = 0;
}

// Step 1: the arguments neither shared nor direct stacked, instance after instance.
void ReverseMode::stack_arguments(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const int64_t B = batch.B;
  for (size_t e = 0; e < s.args.size(); ++e) {
    BatchValue& a = batch.args[e];
    if (a.shared || batch.direct[e]) continue;
    a.data = alloc(B * a.size);
    for (int64_t i = 0; i < B; ++i)
      std::memcpy(a.data + i * a.size, forward_->data(forward_->arg(batch.ids[i], e)),
                  static_cast<size_t>(a.size) * sizeof(float));
  }
}

// A direct argument's instances where they lie and their adjoints' places (when first needed).
std::pair<aot::Operand, aot::AdjointTarget> ReverseMode::direct_operand(Batch& batch, size_t e) {
  if (batch.direct_rows[e].empty()) {
    for (int64_t i = 0; i < batch.B; ++i) {
      const aot::Val& v = forward_->arg(batch.ids[i], e);
      batch.direct_rows[e].push_back(forward_->data(v));
      batch.direct_adjoints[e].push_back(node_adjoint(v));
    }
  }
  return std::pair{aot::Operand{nullptr, 0, batch.direct_rows[e].data(), nullptr},
                   aot::AdjointTarget{nullptr, 0, batch.direct_adjoints[e].data()}};
}

// Step 2: each operator's value as the forward run kept it, else computed on the stack or
// instance by instance; operators that compiled adjoints recompute or read in place get none.
void ReverseMode::compute_values(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  const int64_t B = batch.B;
  const PackedIndex& packed = forward_->packed();
  batch.vals.assign(s.ops.size(), BatchValue{});
  batch.stacked_op.assign(s.ops.size(), 0);
  std::vector<Tensor>& in_t = batch.in_t;
  std::vector<const Tensor*>& in_p = batch.in_p;
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const analysis::BlockOp& op = s.ops[k];
    std::vector<const BatchValue*> in;
    bool any_stacked = false;
    for (const auto& o : op.operands) {
      in.push_back(&batch.operand(o));
      any_stacked = any_stacked || !in.back()->shared;
    }
    BatchValue& v = batch.vals[k];
    v.shape = op.shape;
    v.size = num_elements(op.shape);
    v.shared = !any_stacked;
    const OpAttrs& attrs = batch.attrs(k);
    const ReferenceKernel kernel = reference_kernel(op.rhs->op);
    if (batch.compiled[k] >= 0 && !kp.stored[k]) continue;  // recomputed in the compiled adjoint's registers
    if (batch.in_place[k] >= 0) continue;                    // read in place by compiled adjoints
    if (!v.shared) {
      if (const float* kept = kept_value(batch.b, s, k, batch.row0)) {
        // As the forward run computed it (only read, as a shared argument's tensor is).
        batch.stacked_op[k] = stackable(op.rhs->op, op.shape, attrs, in) ? 1 : 0;
        v.data = const_cast<float*>(kept);
        continue;
      }
    }
    if (v.shared || stackable(op.rhs->op, op.shape, attrs, in)) {
      batch.stacked_op[k] = 1;
      v.data = alloc(v.shared ? v.size : B * v.size);
      in_t.clear();
      for (const BatchValue* x : in) in_t.push_back(view(packed, stacked_shape(*x, B), x->data));
      in_p.clear();
      for (const Tensor& t : in_t) in_p.push_back(&t);
      Tensor out = view(packed, stacked_shape(v, B), v.data);
      kernel(attrs, in_p, out);
      continue;
    }
    v.data = alloc(B * v.size);
    for (int64_t i = 0; i < B; ++i) {
      in_t.clear();
      for (const BatchValue* x : in)
        in_t.push_back(view(packed, x->shape, x->shared ? x->data : x->data + i * x->size));
      in_p.clear();
      for (const Tensor& t : in_t) in_p.push_back(&t);
      Tensor out = view(packed, v.shape, v.data + i * v.size);
      kernel(attrs, in_p, out);
    }
  }
}

// Step 3, first: the adjoints of the block's outputs, as the batches that read them (and the loss
// seeds) added them.
void ReverseMode::seed_outputs(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const int64_t B = batch.B;
  const int b = batch.b;
  batch.dval.assign(s.ops.size(), nullptr);
  batch.darg.assign(s.args.size(), nullptr);
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (!s.ops[k].escapes || !adjoints_[b][k]) continue;
    const BatchValue& v = batch.vals[k];
    if (!v.shared) {
      // The batch output's adjoint as it lies (rows in node order): no batch adds to it any more
      // (its readers ran later, so were differentiated before).
      batch.dval[k] = adjoints_[b][k] + batch.row0 * v.size;
      continue;
    }
    float* d = batch.dval[k] = alloc(v.shared ? v.size : B * v.size, true);
    const float* g = adjoints_[b][k] + forward_->output_offset(b, int(k), forward_->row(batch.ids[0]));
    if (v.shared)
      for (int64_t i = 0; i < B; ++i) add(d, g + i * v.size, v.size);  // a shared value's: summed
    else
      add(d, g, v.size);
  }
}

// The adjoint of operand `o`, zeroed when first reached.
float* ReverseMode::adjoint_of(Batch& batch, const analysis::BlockOperand& o) {
  float*& d = batch.adjoint(o);
  const BatchValue& x = batch.operand(o);
  if (!d) d = alloc(x.shared ? x.size : batch.B * x.size, true);
  return d;
}

// Step 3, then: operator by operator in reverse, each fused loop that has a compiled adjoint at
// its last operator, each product by a param's matrix by weight_product, any other by its rule.
void ReverseMode::run_adjoints(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  for (size_t k = s.ops.size(); k-- > 0;) {
    const analysis::BlockOp& op = s.ops[k];
    if (batch.compiled[k] >= 0) {
      // The whole loop at its last operator (its range's others are views, differentiated after).
      const analysis::KernelStep& st = kp.steps[size_t(batch.compiled[k])];
      bool last = true;
      for (int j = static_cast<int>(k) + 1; j < st.end; ++j) last = last && kp.group[j] != kp.group[k];
      if (last) run_compiled(batch, size_t(batch.compiled[k]));
      continue;
    }
    if (!batch.dval[k] || !differentiable(op.rhs->op)) continue;
    if (!batch.vals[k].shared && op.operands.size() == 2 && weight_product(batch, k)) continue;
    operator_adjoint(batch, k);
  }
}

void ReverseMode::run_compiled(Batch& batch, size_t si) {
  const analysis::StaticBlock& s = *batch.s;
  const analysis::KernelPlan& kp = *batch.kp;
  const analysis::KernelStep& st = kp.steps[si];
  const int g = kp.group[st.begin];
  bool any = false;
  for (int k = st.begin; k < st.end; ++k) any = any || (kp.group[k] == g && batch.dval[k]);
  if (!any) return;
  std::vector<aot::Operand>& fin = batch.fin;
  std::vector<aot::AdjointTarget>& fdin = batch.fdin;
  std::vector<aot::Operand>& fout = batch.fout;
  fin.clear();
  fdin.clear();
  for (const analysis::BlockOperand& o : st.inputs) {
    if (o.local && batch.in_place[o.index] >= 0) {  // a slice of stacked rows
      const analysis::BlockOperand& base = s.ops[o.index].operands[0];
      const BatchValue& x = batch.operand(base);
      fin.push_back({x.data + batch.in_place[o.index], x.size, nullptr, nullptr});
      fdin.push_back({adjoint_of(batch, base) + batch.in_place[o.index], x.size, nullptr});
      continue;
    }
    if (!o.local && batch.direct[o.index]) {
      const auto [x, dx] = direct_operand(batch, size_t(o.index));
      fin.push_back(x);
      fdin.push_back(dx);
      continue;
    }
    const BatchValue& x = batch.operand(o);
    const int64_t stride = x.shared ? 0 : x.size;
    fin.push_back({x.data, stride, nullptr, nullptr});
    fdin.push_back({adjoint_of(batch, o), stride, nullptr});
  }
  const float* zeros = nullptr;
  fout.assign(size_t(st.end - st.begin), aot::Operand{nullptr, 0, nullptr, nullptr});
  for (int k = st.begin; k < st.end; ++k) {
    if (kp.group[k] != g || !kp.stored[k]) continue;
    if (!batch.dval[k] && !zeros) zeros = alloc(st.size, true);
    fout[size_t(k - st.begin)] = batch.dval[k] ? aot::Operand{batch.dval[k], st.size, nullptr, nullptr}
                                               : aot::Operand{zeros, 0, nullptr, nullptr};
  }
  executor_->fused_adjoint(s, si)(aot::AdjointCall{batch.B, fin.data(), fdin.data(), fout.data()});
  stats_->compiled_adjoints++;
}

// y = a + b where a is stacked like y and has no adjoint yet: a's adjoint is y's, taken over rather
// than copied (y's is not read again; a's other readers, differentiated later, add to it). Returns
// the operand taken over, or -1.
int ReverseMode::take_over_add(Batch& batch, size_t k) {
  const analysis::BlockOp& op = batch.s->ops[k];
  const BatchValue& v = batch.vals[k];
  int taken = -1;
  if (op.rhs->op == OpId::Add && !v.shared && batch.stacked_op[k]) {
    const analysis::BlockOperand &o0 = op.operands[0], &o1 = op.operands[1];
    const bool same = o0.local == o1.local && o0.index == o1.index;
    for (int j = 0; j < 2 && taken < 0 && !same; ++j) {
      const analysis::BlockOperand& o = op.operands[size_t(j)];
      float*& d = batch.adjoint(o);
      const BatchValue& x = batch.operand(o);
      if (d || x.shared || x.shape != v.shape) continue;
      d = batch.dval[k];
      taken = j;
    }
  }
  return taken;
}

void ReverseMode::operator_adjoint(Batch& batch, size_t k) {
  const analysis::BlockOp& op = batch.s->ops[k];
  const BatchValue& v = batch.vals[k];
  const int64_t B = batch.B;
  const int taken = take_over_add(batch, k);
  std::vector<float*> din;
  for (size_t j = 0; j < op.operands.size(); ++j)
    din.push_back(int(j) == taken ? nullptr : adjoint_of(batch, op.operands[j]));
  std::vector<TensorArg<float>>& targs = batch.targs;
  if (batch.stacked_op[k] && !v.shared) {
    std::vector<std::vector<int64_t>>& tshapes = batch.tshapes;
    tshapes.clear();
    for (const auto& o : op.operands) tshapes.push_back(stacked_shape(batch.operand(o), B));
    targs.clear();
    for (size_t i = 0; i < op.operands.size(); ++i) targs.push_back({tshapes[i], batch.operand(op.operands[i]).data});
    const std::vector<int64_t> out_shape = stacked_shape(v, B);
    adjoint<float>(op.rhs->op, batch.attrs(k), targs, out_shape, v.data, batch.dval[k], din);
    return;
  }
  // Instance by instance (a shared value: once).
  std::vector<float*>& dins = batch.dins;
  const int64_t n = v.shared ? 1 : B;
  for (int64_t i = 0; i < n; ++i) {
    targs.clear();
    dins.clear();
    for (size_t j = 0; j < op.operands.size(); ++j) {
      const BatchValue& x = batch.operand(op.operands[j]);
      const int64_t off = x.shared ? 0 : i * x.size;
      targs.push_back({x.shape, x.data + off});
      dins.push_back(din[j] + off);
    }
    adjoint<float>(op.rhs->op, batch.attrs(k), targs, v.shape, v.data + i * v.size, batch.dval[k] + i * v.size, dins);
  }
}

void ReverseMode::send_arguments(Batch& batch) {
  const analysis::StaticBlock& s = *batch.s;
  for (size_t e = 0; e < s.args.size(); ++e) {
    if (!batch.darg[e]) continue;
    const BatchValue& a = batch.args[e];
    if (a.shared) {
      send(forward_->arg(batch.ids[0], e), batch.darg[e], a.size);
      continue;
    }
    for (int64_t i = 0; i < batch.B; ++i) send(forward_->arg(batch.ids[i], e), batch.darg[e] + i * a.size, a.size);
  }
}

// Peak memory: the forward's values (all still held), the outputs' adjoints, one batch's values
// and adjoints at most, the rows kept for dW and the packed W^T.
void ReverseMode::count_memory() {
  const size_t held = forward_->bytes_in_use() + grad_outputs_.bytes_in_use() + grad_values_.peak_bytes() +
                      products_.bytes();
  stats_->peak_bytes = std::max<int64_t>(stats_->peak_bytes, static_cast<int64_t>(held));
}

}  // namespace acrobat
