// Reverse mode on the executed schedule (Graph::backward, graph.h).
//
// The forward run kept every batch output and every value its kernels stored (reset with
// keep_outputs). The batches run in reverse order of execution; a batch whose outputs received no
// adjoint is skipped. For one batch:
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
//     them). On the stack the adjoint of a shared operand is summed over the
//     instances by the broadcast rule. A product X W of stacked rows by a param's matrix is special:
//     dX = dY W^T on W^T packed once per call, and dW is deferred: its rows of X and dY are kept,
//     and one GEMM over every batch's rows adds dW at the end (one pass over the gradient of W
//     instead of one per batch, and a GEMM of hundreds of rows instead of many of a few).
//  4. Each argument's adjoint goes where the argument came from: a lazy value to the adjoint of
//     the producing node's output row, a row or whole tensor of a param to that param's gradient
//     at the same place, rows a gather stacked (Graph::gathered) to the param rows they were
//     copied from, anything else (inputs, constants) nowhere.
// A batch whose nodes pick different matrices of an indexed param (per-layer or per-child
// weights: the forward ordered it so that each matrix is a run of rows) is differentiated run by
// run, each matrix shared by its run, so that its products take the path above rather than
// stacking a matrix per instance.
// A ragged batch (shapes with size variables) is differentiated instance by instance, each on the
// block with its sizes bound, every value recomputed from the arguments.
// Everything runs in an order fixed by the schedule, on the calling thread except the blocks of the
// products by weights (dX by 256 rows, dW by 512 columns), which a pool's threads share; the blocks
// are cut the same way at any thread count: the same gradients, bit for bit, whatever the threads.
#include <algorithm>
#include <cstring>

#include "acrobat/kernels.h"
#include "autodiff/adjoints.h"
#include "runtime/batched_kernels.h"
#include "runtime/graph.h"
#include "runtime/reference_kernels.h"

namespace acrobat {

namespace {

// A value of the batch being differentiated: one tensor for all instances (shared) or the
// instances' values one after another (stacked); `shape` is the per-instance shape.
struct BatchValue {
  bool shared = true;
  std::vector<int64_t> shape;
  float* data = nullptr;
  int64_t size = 0;  // per-instance elements
};

// Where the tensors of the params live, to send an argument's adjoint to a param's gradient.
class ParamRanges {
 public:
  explicit ParamRanges(const ParamStore& params) {
    for (size_t p = 0; p < params.params.size(); ++p) {
      const Tensor& t = params.params[p].tensor;
      ranges_.push_back({t.data.get(), t.data.get() + t.size(), static_cast<int>(p)});
    }
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  }
  // The param whose storage holds `p` and the offset of `p` in it; {-1, 0} for none.
  std::pair<int, int64_t> find(const float* p) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), p,
                               [](const float* x, const Range& r) { return x < r.begin; });
    if (it == ranges_.begin()) return {-1, 0};
    --it;
    if (p >= it->end) return {-1, 0};
    return {it->param, p - it->begin};
  }

 private:
  struct Range {
    const float* begin;
    const float* end;
    int param;
  };
  std::vector<Range> ranges_;
};

void add(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Whether operator `op` computes its stacked result by running once on the stacked operands: every
// stacked operand and the result are rows ([1, ...], rank >= 2, so that the stack is [B, ...]), and
// it does not act along the first axis.
bool stackable(const analysis::BlockOp& op, const OpAttrs& attrs, const std::vector<const BatchValue*>& in) {
  const size_t rank = op.shape.size();
  if (rank < 2 || op.shape[0] != 1) return false;
  for (const BatchValue* v : in)
    if (!v->shared && (v->shape.size() != rank || v->shape[0] != 1)) return false;
  auto axis_ok = [&](int64_t axis) { return normalize_axis(axis, rank) != 0; };
  switch (op_info(op.rhs->op).op_class) {
    case OpClass::Elementwise:
      // A shared operand broadcasts along the stack: it must be a row too (or have lower rank).
      for (const BatchValue* v : in)
        if (v->shared && v->shape.size() == rank && v->shape[0] != 1) return false;
      return true;
    case OpClass::RowWise:  // layer_norm's gamma and beta: one for all
      for (size_t i = 1; i < in.size(); ++i)
        if (!in[i]->shared) return false;
      return !in[0]->shared;
    case OpClass::Reduce: return !in[0]->shared && axis_ok(attrs.ints[0]);
    case OpClass::Gemm: return !in[0]->shared && in[1]->shared && in[1]->shape.size() == 2;
    case OpClass::DataMovement:
      if (op.rhs->op == OpId::Concat) {
        for (const BatchValue* v : in)
          if (v->shared) return false;
        return axis_ok(attrs.ints[0]);
      }
      if (op.rhs->op == OpId::Slice) return !in[0]->shared && axis_ok(attrs.ints[2]);
      return false;
    default: return false;
  }
}

// The shape a stacked value has as one tensor: the per-instance shape with B for its leading 1.
std::vector<int64_t> stacked_shape(const BatchValue& v, int64_t B) {
  std::vector<int64_t> s = v.shape;
  if (!v.shared) s[0] = B;
  return s;
}

}  // namespace

void Graph::backward(std::span<const aot::Val> losses, const ParamStore& params, std::vector<Tensor>& grads,
                     ThreadPool* pool, WrittenChunks* written, const BlockExecutor* executor) {
  const size_t num_batches = batch_sizes_.size();
  ACROBAT_ASSERT(!release_, "backward needs the outputs of a run reset with keep_outputs");
  // The nodes of each batch by row, and the adjoints of the batch outputs (allocated when first
  // reached, same layout as batch_outputs_).
  std::vector<std::vector<int>> members(num_batches);
  for (size_t b = 0; b < num_batches; ++b) members[b].assign(static_cast<size_t>(batch_sizes_[b]), -1);
  for (int32_t id = 0; id < num_nodes_; ++id) {
    const Node& n = nodes_[id];
    if (n.repeats >= 0) continue;  // a shared node: its adjoints are the node's it repeats
    ACROBAT_ASSERT(n.batch >= 0, "backward over a graph with pending nodes");
    members[n.batch][n.row] = id;
  }
  std::vector<std::vector<float*>> adj(num_batches);
  grad_outputs_.reset();
  grad_values_.reset();
  grad_values_.reset_peak();
  auto output_adjoint = [&](int batch, int slot) -> float* {
    auto& per_op = adj[batch];
    if (per_op.empty()) per_op.assign(plan_.blocks[batch_blocks_[batch]].ops.size(), nullptr);
    float*& a = per_op[slot];
    if (!a) {
      const size_t n = output_floats(batch, slot);
      a = grad_outputs_.alloc(n);
      std::fill_n(a, n, 0.0f);
    }
    return a;
  };
  const ParamRanges ranges(params);
  if (written) {
    written->assign(grads.size(), {});
    for (size_t p = 0; p < grads.size(); ++p)
      (*written)[p].assign(size_t((grads[p].size() + kGradChunk - 1) / kGradChunk), uint8_t{0});
  }
  // Notes that elements [offset, offset + n) of param p's gradient are written.
  auto mark = [&](int p, int64_t offset, int64_t n) {
    if (!written || n <= 0) return;
    std::vector<uint8_t>& w = (*written)[size_t(p)];
    std::fill(w.begin() + offset / kGradChunk, w.begin() + (offset + n - 1) / kGradChunk + 1, uint8_t{1});
  };
  std::vector<const Gather*> gathers;  // by address
  for (const Gather& x : gathers_) gathers.push_back(&x);
  std::sort(gathers.begin(), gathers.end(), [](const Gather* a, const Gather* b) { return a->out < b->out; });
  // Sends the adjoint `g` (n floats) of the tensor `v` refers to where it came from.
  // Where the adjoint of the lazy tensor `v` (a node's output row) is added.
  auto node_adjoint = [&](const aot::Val& v) {
    const Node& src = nodes_[first(v.node)];
    return output_adjoint(src.batch, v.lazy.slot) + output_offset(src.batch, v.lazy.slot, src.row);
  };
  auto send = [&](const aot::Val& v, const float* g, int64_t n) {
    if (v.node >= 0) {
      add(node_adjoint(v), g, n);
      return;
    }
    const auto [param, offset] = ranges.find(v.data);
    if (param >= 0) {
      add(grads[param].data.get() + offset, g, n);
      mark(param, offset, n);
      return;
    }
    // Rows a gather stacked: each row's adjoint to the row of the param it came from.
    auto it = std::upper_bound(gathers.begin(), gathers.end(), v.data,
                               [](const float* p, const Gather* x) { return p < x->out; });
    if (it == gathers.begin()) return;
    const Gather& x = **--it;
    const int64_t at = v.data - x.out;
    if (at >= x.row * static_cast<int64_t>(x.count)) return;  // not in it: an input or a constant
    for (int64_t i = 0; i < n;) {
      const int64_t k = (at + i) / x.row, in_row = (at + i) % x.row, len = std::min(n - i, x.row - in_row);
      const auto [p, o] = ranges.find(gather_rows_[x.begin + k]);
      ACROBAT_ASSERT(p >= 0, "a gathered row comes from a param");  // Graph::gathered records param rows only
      add(grads[p].data.get() + o + in_row, g + i, len);
      mark(p, o + in_row, len);
      i += len;
    }
  };
  static constexpr float kOne = 1.0f;  // d(sum of the losses)/d(each loss)
  for (const aot::Val& loss : losses) send(loss, &kOne, 1);

  std::vector<BatchValue> vals, args;
  // The batch's values (written whole by their producers) and adjoints (zeroed: they accumulate);
  // the memory is reused from batch to batch and run to run.
  auto alloc = [&](int64_t n, bool zero = false) {
    const size_t count = static_cast<size_t>(std::max<int64_t>(n, 1));
    float* p = grad_values_.alloc(count);
    if (zero) std::fill_n(p, count, 0.0f);
    return p;
  };

  // The value of operator k of batch b as the forward run left it ([B, size], rows in node order),
  // or null where the kernel did not store it (fused into a loop, a strided view, a buffer that
  // holds a matmul plus its bias, or a deferred bias not yet added).
  // `row0`: the batch row of the first instance differentiated (a run of a batch, below).
  auto kept_value = [&](int b, const analysis::StaticBlock& s, size_t k, int64_t row0) -> float* {
    const analysis::KernelPlan& kp = plan_.kernels[s.id];
    const analysis::BlockOp& op = s.ops[k];
    const std::vector<float*>& outputs = batch_outputs_[b];
    if (op.view) return op.escapes ? outputs[k] + row0 * op.size : nullptr;  // an escaping view is copied out whole
    const analysis::ValueLoc& l = kp.loc[k];
    if (l.arg || l.bias >= 0 || l.stride != op.size || l.offset != 0) return nullptr;
    const int o = l.index;  // the owner of the buffer
    if (static_cast<int>(k) == o && op.bias_arg >= 0 && !kp.deferred_bias[k]) return nullptr;
    return outputs[kp.buffer_slot[o] >= 0 ? kp.buffer_slot[o] : o] + row0 * op.size;
  };

  // Products by a param's matrix (see graph.h): W^T packed once per call, dW deferred.
  ++backward_calls_;
  for (WeightRows& w : weight_rows_) w.rows = 0;
  auto transposed = [&](const float* w, int K, int N) -> const kernels::PackedWeights& {
    TransposedWeight& t = transposed_[w];
    if (t.call == backward_calls_ && t.packed->K() == N && t.packed->N() == K) return *t.packed;
    if (t.packed && t.packed->K() == N && t.packed->N() == K)
      t.packed->repack_transposed(w, N);
    else
      t.packed = kernels::pack_transposed_weights(N, K, w, N);
    t.call = backward_calls_;
    return *t.packed;
  };
  // The adjoint of op k = X W on stacked rows X by W[K, N], a matrix of a param, when it is one:
  // dX += dY W^T now, the rows of X and dY kept for dW.
  // `dx`: X's adjoint, allocated here when it has none yet (then written rather than added to).
  auto weight_product = [&](const analysis::BlockOp& op, const BatchValue& x, const BatchValue& w, const float* dy,
                            float*& dx, int64_t B) {
    if (op.rhs->op != OpId::MatMul || x.shared || !w.shared || w.shape.size() != 2) return false;
    const std::pair<int, int64_t> found = ranges.find(w.data);  // (not a structured binding: a lambda below reads it)
    const int param = found.first;
    const int64_t offset = found.second;
    const int K = static_cast<int>(w.shape[0]), N = static_cast<int>(w.shape[1]);
    if (param < 0 || offset + int64_t(K) * N > grads[param].size() || x.shape.back() != K) return false;
    const int64_t rows = B * (x.size / K);
    // Into fresh memory, then added to an adjoint X already has: a GEMM accumulating onto it
    // would round each partial sum to the adjoint's magnitude.
    float* const prior = dx;
    dx = alloc(rows * K);
    stats_->weight_products++;
    // W^T packed pays when W is weight-sized (the rule of kernels::gemm_strided's transposes).
    // Cut into blocks of kRows rows (whole 64-row blocks of the JIT kernels, the same cut at any
    // thread count) for the pool to share.
    constexpr int64_t kRows = 256;
    if (K >= 128 && N >= 128) {
      const kernels::PackedWeights& wt = transposed(w.data, K, N);
      const int64_t blocks = (rows + kRows - 1) / kRows;
      auto block = [&](int64_t i, int) {
        const int64_t r0 = i * kRows, r1 = std::min(rows, r0 + kRows);
        kernels::gemm_packed(static_cast<int>(r1 - r0), dy + r0 * N, N, wt, dx + r0 * K, K, false);
      };
      for_each_piece(pool, blocks, block);
    } else
      kernels::gemm_strided(false, true, static_cast<int>(rows), K, N, dy, N, w.data, N, dx, K, false);
    if (prior) {
      kernels::binary(kernels::BinaryOp::Add, prior, dx, prior, static_cast<size_t>(rows * K));
      dx = prior;
    }
    auto it = std::find_if(weight_rows_.begin(), weight_rows_.end(), [&](const WeightRows& r) {
      return r.param == param && r.offset == offset && r.K == K && r.N == N;
    });
    if (it == weight_rows_.end()) it = weight_rows_.insert(weight_rows_.end(), WeightRows{param, offset, K, N, {}, {}, 0});
    WeightRows& r = *it;
    // Grown, never shrunk: the next call reuses the memory without zeroing it again.
    if (r.x.size() < size_t(r.rows + rows) * K) r.x.resize(std::max(r.x.size() * 2, size_t(r.rows + rows) * K));
    if (r.dy.size() < size_t(r.rows + rows) * N) r.dy.resize(std::max(r.dy.size() * 2, size_t(r.rows + rows) * N));
    std::copy_n(x.data, rows * K, r.x.data() + r.rows * K);
    std::copy_n(dy, rows * N, r.dy.data() + r.rows * N);
    r.rows += rows;
    return true;
  };
  // One batch, or one instance of a ragged batch (then `s` is the block with that instance's
  // sizes bound into its shapes and `attrs` per operator, and B is 1): steps 1 to 4 above.
  std::vector<OpAttrs> bound_attrs;
  auto differentiate = [&](int b, const analysis::StaticBlock& s, const int* ids, int64_t B, bool ragged) {
    auto attrs_of = [&](size_t k) -> const OpAttrs& { return ragged ? bound_attrs[k] : s.ops[k].rhs->attrs; };
    // The batch rows of a static batch's instances are consecutive from row0 (all of it, or a run).
    const int64_t row0 = ragged ? 0 : nodes_[ids[0]].row;
    grad_values_.reset();

    // 1. Arguments.
    args.assign(s.args.size(), BatchValue{});
    for (size_t e = 0; e < s.args.size(); ++e) {
      BatchValue& a = args[e];
      a.shape = s.args[e].shape;
      a.size = num_elements(a.shape);
      const float* first = data(args_[nodes_[ids[0]].arg_begin + e]);
      // One instance (a ragged batch's, or a batch of one node): a param's tensor is shared,
      // anything else its own, so that a product by weights takes the weights' path (and a batch
      // of one reads the values its forward kernels kept).
      a.shared = (!ragged && B > 1) || ranges.find(first).first >= 0;
      for (int64_t i = 1; i < B && a.shared; ++i) a.shared = data(args_[nodes_[ids[i]].arg_begin + e]) == first;
      if (a.shared) a.data = const_cast<float*>(first);
    }

    // Fused loops differentiated by their compiled adjoints (per operator: its step, or -1): those
    // whose operators are all stacked and whose values no view in their range reads.
    const analysis::KernelPlan& kp = plan_.kernels[s.id];
    std::vector<int> compiled(s.ops.size(), -1);
    // Slices of stacked rows ([1, N] per instance, along N) that only compiled adjoints read, as
    // whole rows: the adjoint reads them inside the sliced rows and adds to the sliced value's
    // adjoint in place, so that neither the slice nor its adjoint is copied. Per operator: where
    // the slice begins in the row, or -1.
    std::vector<int64_t> in_place(s.ops.size(), -1);
    if (executor && !ragged) {
      std::vector<uint8_t> shared(s.ops.size(), 0);
      for (size_t k = 0; k < s.ops.size(); ++k) {
        bool all = true;
        for (const auto& o : s.ops[k].operands) all = all && (o.local ? shared[o.index] != 0 : args[o.index].shared);
        shared[k] = all ? 1 : 0;
      }
      for (size_t si = 0; si < kp.steps.size(); ++si) {
        const analysis::KernelStep& st = kp.steps[si];
        if (st.kind != analysis::StepKind::Fused || !executor->fused_adjoint(s, si)) continue;
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
          if (kp.group[k] == g) compiled[k] = static_cast<int>(si);
      }
      std::vector<uint8_t> read_whole(s.ops.size(), 0), read_otherwise(s.ops.size(), 0);
      for (size_t k = 0; k < s.ops.size(); ++k)
        for (size_t a = 0; a < s.ops[k].operands.size(); ++a) {
          const analysis::BlockOperand& o = s.ops[k].operands[a];
          if (!o.local) continue;
          const bool whole = compiled[k] >= 0 && (kp.loads[k][a] == analysis::FusedLoad::Full ||
                                                   kp.loads[k][a] == analysis::FusedLoad::FullPlusBias);
          (whole ? read_whole : read_otherwise)[o.index] = 1;
        }
      for (size_t k = 0; k < s.ops.size(); ++k) {
        const analysis::BlockOp& op = s.ops[k];
        if (op.rhs->op != OpId::Slice || op.escapes || !read_whole[k] || read_otherwise[k]) continue;
        const analysis::BlockOperand& base = op.operands[0];
        const std::vector<int64_t>& shape = base.local ? s.ops[base.index].shape : s.args[base.index].shape;
        const bool stacked = base.local ? !shared[base.index] : !args[base.index].shared;
        if (stacked && shape.size() == 2 && shape[0] == 1 && normalize_axis(op.rhs->attrs.ints[2], 2) == 1)
          in_place[k] = op.rhs->attrs.ints[0];
      }
    }

    // Arguments read only by compiled adjoints (whose values no operator computes here from them)
    // and computed by the graph: the adjoints read each instance's where it lies and add to the
    // adjoint of the node output it came from in place, so that it is neither stacked here nor
    // sent in step 4. The others not shared are stacked.
    std::vector<uint8_t> direct(s.args.size(), 0);
    if (executor && !ragged) {
      for (size_t e = 0; e < s.args.size(); ++e) {
        bool ok = !args[e].shared;
        for (int64_t i = 0; i < B && ok; ++i) ok = args_[nodes_[ids[i]].arg_begin + e].node >= 0;
        direct[e] = ok ? 1 : 0;
      }
      for (size_t k = 0; k < s.ops.size(); ++k)
        for (const analysis::BlockOperand& o : s.ops[k].operands)
          if (!o.local && direct[o.index] &&
              !(compiled[k] >= 0 && (!kp.stored[k] || kept_value(b, s, k, row0))))
            direct[o.index] = 0;
    }
    for (size_t e = 0; e < s.args.size(); ++e) {
      BatchValue& a = args[e];
      if (a.shared || direct[e]) continue;
      a.data = alloc(B * a.size);
      for (int64_t i = 0; i < B; ++i)
        std::memcpy(a.data + i * a.size, data(args_[nodes_[ids[i]].arg_begin + e]),
                    static_cast<size_t>(a.size) * sizeof(float));
    }
    // A direct argument's instances where they lie and their adjoints' places (when first needed).
    std::vector<std::vector<const float*>> direct_rows(s.args.size());
    std::vector<std::vector<float*>> direct_adjoints(s.args.size());
    auto direct_operand = [&](size_t e) {
      if (direct_rows[e].empty()) {
        for (int64_t i = 0; i < B; ++i) {
          const aot::Val& v = args_[nodes_[ids[i]].arg_begin + e];
          direct_rows[e].push_back(data(v));
          direct_adjoints[e].push_back(node_adjoint(v));
        }
      }
      return std::pair{aot::Operand{nullptr, 0, direct_rows[e].data(), nullptr},
                       aot::AdjointTarget{nullptr, 0, direct_adjoints[e].data()}};
    };

    // 2. Values.
    vals.assign(s.ops.size(), BatchValue{});
    std::vector<uint8_t> stacked_op(s.ops.size(), 0);
    auto operand = [&](const analysis::BlockOperand& o) -> BatchValue& {
      return o.local ? vals[o.index] : args[o.index];
    };
    std::vector<Tensor> in_t;
    std::vector<const Tensor*> in_p;
    // A tensor over `p` (not owned), with a weight's packed copy when it has one.
    auto view = [&](const std::vector<int64_t>& shape, float* p) {
      Tensor t;
      t.shape = shape;
      t.data = Tensor::borrow(p);
      if (shape.size() == 2)
        if (const kernels::PackedWeights* w = packed_->find(p))
          t.packed = std::shared_ptr<const kernels::PackedWeights>(std::shared_ptr<const kernels::PackedWeights>(), w);
      return t;
    };
    for (size_t k = 0; k < s.ops.size(); ++k) {
      const analysis::BlockOp& op = s.ops[k];
      std::vector<const BatchValue*> in;
      bool any_stacked = false;
      for (const auto& o : op.operands) {
        in.push_back(&operand(o));
        any_stacked = any_stacked || !in.back()->shared;
      }
      BatchValue& v = vals[k];
      v.shape = op.shape;
      v.size = num_elements(op.shape);
      v.shared = !any_stacked;
      const OpAttrs& attrs = attrs_of(k);
      const ReferenceKernel kernel = reference_kernel(op.rhs->op);
      if (compiled[k] >= 0 && !kp.stored[k]) continue;  // recomputed in the compiled adjoint's registers
      if (in_place[k] >= 0) continue;                    // read in place by compiled adjoints
      if (!v.shared) {
        if (float* kept = ragged ? nullptr : kept_value(b, s, k, row0)) {  // as the forward run computed it
          stacked_op[k] = stackable(op, attrs, in) ? 1 : 0;
          v.data = kept;
          continue;
        }
      }
      if (v.shared || stackable(op, attrs, in)) {
        stacked_op[k] = 1;
        v.data = alloc(v.shared ? v.size : B * v.size);
        in_t.clear();
        for (const BatchValue* x : in) in_t.push_back(view(stacked_shape(*x, B), x->data));
        in_p.clear();
        for (const Tensor& t : in_t) in_p.push_back(&t);
        Tensor out = view(stacked_shape(v, B), v.data);
        kernel(attrs, in_p, out);
        continue;
      }
      v.data = alloc(B * v.size);
      for (int64_t i = 0; i < B; ++i) {
        in_t.clear();
        for (const BatchValue* x : in) in_t.push_back(view(x->shape, x->shared ? x->data : x->data + i * x->size));
        in_p.clear();
        for (const Tensor& t : in_t) in_p.push_back(&t);
        Tensor out = view(v.shape, v.data + i * v.size);
        kernel(attrs, in_p, out);
      }
    }

    // 3. Adjoints: the outputs', then back through the operators.
    std::vector<float*> dval(s.ops.size(), nullptr), darg(s.args.size(), nullptr);
    auto adjoint_of = [&](const analysis::BlockOperand& o) -> float* {
      float*& d = o.local ? dval[o.index] : darg[o.index];
      const BatchValue& x = operand(o);
      if (!d) d = alloc(x.shared ? x.size : B * x.size, true);
      return d;
    };
    for (size_t k = 0; k < s.ops.size(); ++k) {
      if (!s.ops[k].escapes || !adj[b][k]) continue;
      const BatchValue& v = vals[k];
      if (!v.shared && !ragged) {
        // The batch output's adjoint as it lies (rows in node order): no batch adds to it any more
        // (its readers ran later, so were differentiated before).
        dval[k] = adj[b][k] + row0 * v.size;
        continue;
      }
      float* d = dval[k] = alloc(v.shared ? v.size : B * v.size, true);
      const float* g = adj[b][k] + output_offset(b, k, nodes_[ids[0]].row);
      if (v.shared)
        for (int64_t i = 0; i < B; ++i) add(d, g + i * v.size, v.size);  // a shared value's: summed
      else
        add(d, g, v.size);
    }
    std::vector<TensorArg<float>> targs;
    std::vector<std::vector<int64_t>> tshapes;
    std::vector<float*> dins;
    std::vector<aot::Operand> fin, fout;
    std::vector<aot::AdjointTarget> fdin;
    // The compiled adjoint of fused step `si`, unless no adjoint reached its operators.
    auto run_compiled = [&](size_t si) {
      const analysis::KernelStep& st = kp.steps[si];
      const int g = kp.group[st.begin];
      bool any = false;
      for (int k = st.begin; k < st.end; ++k) any = any || (kp.group[k] == g && dval[k]);
      if (!any) return;
      const std::vector<analysis::BlockOperand>& inputs = st.inputs;
      fin.clear();
      fdin.clear();
      for (const analysis::BlockOperand& o : inputs) {
        if (o.local && in_place[o.index] >= 0) {  // a slice of stacked rows
          const analysis::BlockOperand& base = s.ops[o.index].operands[0];
          const BatchValue& x = operand(base);
          fin.push_back({x.data + in_place[o.index], x.size, nullptr, nullptr});
          fdin.push_back({adjoint_of(base) + in_place[o.index], x.size, nullptr});
          continue;
        }
        if (!o.local && direct[o.index]) {
          const auto [x, dx] = direct_operand(size_t(o.index));
          fin.push_back(x);
          fdin.push_back(dx);
          continue;
        }
        const BatchValue& x = operand(o);
        const int64_t stride = x.shared ? 0 : x.size;
        fin.push_back({x.data, stride, nullptr, nullptr});
        fdin.push_back({adjoint_of(o), stride, nullptr});
      }
      const float* zeros = nullptr;
      fout.assign(size_t(st.end - st.begin), aot::Operand{nullptr, 0, nullptr, nullptr});
      for (int k = st.begin; k < st.end; ++k) {
        if (kp.group[k] != g || !kp.stored[k]) continue;
        if (!dval[k] && !zeros) zeros = alloc(st.size, true);
        fout[size_t(k - st.begin)] = dval[k] ? aot::Operand{dval[k], st.size, nullptr, nullptr}
                                             : aot::Operand{zeros, 0, nullptr, nullptr};
      }
      executor->fused_adjoint(s, si)(aot::AdjointCall{B, fin.data(), fdin.data(), fout.data()});
      stats_->compiled_adjoints++;
    };
    for (size_t k = s.ops.size(); k-- > 0;) {
      const analysis::BlockOp& op = s.ops[k];
      if (compiled[k] >= 0) {
        // The whole loop at its last operator (its range's others are views, differentiated after).
        const analysis::KernelStep& st = kp.steps[size_t(compiled[k])];
        bool last = true;
        for (int j = static_cast<int>(k) + 1; j < st.end; ++j) last = last && kp.group[j] != kp.group[k];
        if (last) run_compiled(size_t(compiled[k]));
        continue;
      }
      if (!dval[k] || !differentiable(op.rhs->op)) continue;
      const BatchValue& v = vals[k];
      if (!v.shared && op.operands.size() == 2) {
        const analysis::BlockOperand& xo = op.operands[0];
        if (weight_product(op, operand(xo), operand(op.operands[1]), dval[k], xo.local ? dval[xo.index] : darg[xo.index], B))
          continue;
      }
      // y = a + b where a is stacked like y and has no adjoint yet: a's adjoint is y's, taken over
      // rather than copied (y's is not read again; a's other readers, differentiated later, add
      // to it).
      int taken = -1;
      if (op.rhs->op == OpId::Add && !v.shared && stacked_op[k]) {
        const analysis::BlockOperand &o0 = op.operands[0], &o1 = op.operands[1];
        const bool same = o0.local == o1.local && o0.index == o1.index;
        for (int j = 0; j < 2 && taken < 0 && !same; ++j) {
          const analysis::BlockOperand& o = op.operands[size_t(j)];
          float*& d = o.local ? dval[o.index] : darg[o.index];
          const BatchValue& x = operand(o);
          if (d || x.shared || x.shape != v.shape) continue;
          d = dval[k];
          taken = j;
        }
      }
      std::vector<float*> din;
      for (size_t j = 0; j < op.operands.size(); ++j)
        din.push_back(int(j) == taken ? nullptr : adjoint_of(op.operands[j]));
      if (stacked_op[k] && !v.shared) {
        tshapes.clear();
        for (const auto& o : op.operands) tshapes.push_back(stacked_shape(operand(o), B));
        targs.clear();
        for (size_t i = 0; i < op.operands.size(); ++i) targs.push_back({tshapes[i], operand(op.operands[i]).data});
        const std::vector<int64_t> out_shape = stacked_shape(v, B);
        adjoint<float>(op.rhs->op, attrs_of(k), targs, out_shape, v.data, dval[k], din);
        continue;
      }
      // Instance by instance (a shared value: once).
      const int64_t n = v.shared ? 1 : B;
      for (int64_t i = 0; i < n; ++i) {
        targs.clear();
        dins.clear();
        for (size_t j = 0; j < op.operands.size(); ++j) {
          const BatchValue& x = operand(op.operands[j]);
          const int64_t off = x.shared ? 0 : i * x.size;
          targs.push_back({x.shape, x.data + off});
          dins.push_back(din[j] + off);
        }
        adjoint<float>(op.rhs->op, attrs_of(k), targs, v.shape, v.data + i * v.size, dval[k] + i * v.size, dins);
      }
    }

    // 4. The arguments' adjoints to their sources.
    for (size_t e = 0; e < s.args.size(); ++e) {
      if (!darg[e]) continue;
      const BatchValue& a = args[e];
      if (a.shared) {
        send(args_[nodes_[ids[0]].arg_begin + e], darg[e], a.size);
        continue;
      }
      for (int64_t i = 0; i < B; ++i) send(args_[nodes_[ids[i]].arg_begin + e], darg[e] + i * a.size, a.size);
    }
  };

  std::vector<int64_t> sizes;
  for (size_t bi = num_batches; bi-- > 0;) {
    const int b = static_cast<int>(bi);
    if (adj[b].empty()) continue;
    const analysis::StaticBlock& s = plan_.blocks[batch_blocks_[b]];
    const std::vector<int>& ids = members[b];
    if (!s.ragged()) {
      // A matrix of an indexed param that the nodes pick (per-layer or per-child weights): each
      // run of nodes picking the same matrix (the forward ordered the batch so) is differentiated
      // on its own, the matrix shared by its nodes, so that its products take the weights' path
      // (dX by one GEMM, dW deferred) instead of one matrix per instance.
      const int e = indexed_weight_arg(s);
      size_t r0 = 0;
      for (size_t r1 = 1; r1 <= ids.size(); ++r1) {
        if (r1 < ids.size() && (e < 0 || data(args_[nodes_[ids[r1]].arg_begin + e]) ==
                                              data(args_[nodes_[ids[r0]].arg_begin + e])))
          continue;
        differentiate(b, s, ids.data() + r0, static_cast<int64_t>(r1 - r0), false);
        r0 = r1;
      }
      continue;
    }
    // A ragged batch: instance by instance, each on the block with its sizes bound.
    const size_t S = s.sizes.size();
    for (size_t i = 0; i < ids.size(); ++i) {
      const Node& n = nodes_[ids[i]];
      sizes.assign(sizes_.begin() + n.size_begin, sizes_.begin() + n.size_begin + S);
      analysis::StaticBlock bound = s;
      bound.sizes.clear();
      bound_attrs.clear();
      for (analysis::BlockOp& op : bound.ops) {
        op.shape = bind_sizes(op.shape, s.sizes.data(), sizes.data(), S);
        op.size = num_elements(op.shape);
        bound_attrs.push_back(bind_attr_sizes(op.rhs->attrs, s.sizes.data(), sizes.data(), S));
      }
      for (analysis::BlockArg& a : bound.args) a.shape = bind_sizes(a.shape, s.sizes.data(), sizes.data(), S);
      differentiate(b, bound, &ids[i], 1, true);
    }
  }

  // Peak memory: the forward's values (all still held), the outputs' adjoints, one batch's values
  // and adjoints at most, the rows kept for dW and the packed W^T.
  size_t held = buffers_.bytes_in_use() + grad_outputs_.bytes_in_use() + grad_values_.peak_bytes();
  for (const WeightRows& r : weight_rows_) held += (r.x.size() + r.dy.size()) * sizeof(float);
  for (const auto& [w, t] : transposed_) held += size_t(t.packed->K()) * t.packed->N() * sizeof(float);  // panels
  stats_->peak_bytes = std::max<int64_t>(stats_->peak_bytes, static_cast<int64_t>(held));

  // dW = X^T dY over every row of every product by W: one GEMM per matrix, cut into blocks of
  // kColumns columns (always, so that a block is the same GEMM on one thread or many).
  constexpr int kColumns = 512;
  struct Piece {
    const WeightRows* r;
    int begin, end;
  };
  std::vector<Piece> pieces;
  for (const WeightRows& r : weight_rows_) {
    if (r.rows == 0) continue;
    mark(r.param, r.offset, int64_t(r.K) * r.N);
    for (int c = 0; c < r.N; c += kColumns) pieces.push_back({&r, c, std::min(r.N, c + kColumns)});
  }
  auto dw = [&](const Piece& p) {
    const WeightRows& r = *p.r;
    kernels::gemm_strided(true, false, r.K, p.end - p.begin, static_cast<int>(r.rows), r.x.data(), r.K,
                          r.dy.data() + p.begin, r.N, grads[r.param].data.get() + r.offset + p.begin, r.N, true);
  };
  for_each_piece(pool, static_cast<int64_t>(pieces.size()), [&](int64_t i, int) { dw(pieces[size_t(i)]); });
}

}  // namespace acrobat
