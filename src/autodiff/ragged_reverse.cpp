// Reverse mode on a ragged batch (steps 1 to 4 of the algorithm note in reverse_mode.cpp): every
// value keeps its instances one after another, each packed in its own shape, as the forward's
// ragged blocks lay them out (runtime/ragged_blocks.cpp). So an operator that acts on rows along
// axes every instance has alike runs once over all of the batch's rows, as in the forward: a
// product by a param's matrix is one GEMM for dX over every instance's rows and, from
// kRowsForDwNow rows, one GEMM for dW added at once (fewer rows are kept for the deferred dW, as a
// static batch's are), and an elementwise or row-wise operator (a layer norm, a residual, a bias)
// is one call over the rows, the adjoint of a shared operand summed over them by the broadcast
// rule; relu, tanh, sigmoid, exp, a product by a constant and softmax take SIMD kernels over the
// whole batch's buffer (a softmax of scores scaled by a constant with the scale in the same pass:
// scaled_into), a layer norm over the rows (kernel_adjoint). The others (attention's
// products of two of an instance's values, anything along a ragged axis) run instance by instance
// on each instance's shapes; those products read their column-slice, heads and transposed operands
// where the forward reads them and add their adjoints there (read_in_place). The values the
// adjoints read are the forward's, which a run that keeps its values stores for every operator its
// plan stores on its own (runtime/batch_runner.cpp); the others (views read elsewhere, members of
// fused loops, a matmul's product before its fused addends) are computed again from the arguments
// on the same layout, and only where an adjoint reads them.
#include <algorithm>
#include <cstring>
#include <optional>

#include "autodiff/adjoints.h"
#include "autodiff/batch_values.h"
#include "autodiff/leaf_ranges.h"
#include "autodiff/reverse_mode.h"
#include "runtime/reference_kernels.h"
#include "runtime/strided.h"

namespace acrobat {

namespace {

// A value of a ragged batch: one tensor for all instances (shared), or each instance's, packed, one
// after another from `data`.
struct RaggedValue {
  bool shared = false;
  float* data = nullptr;
  std::vector<std::vector<int64_t>> shapes;  // per instance (shared: one)
  std::vector<int64_t> begin;                // where each instance's elements begin, then the end
  // The instances' values one after another as one tensor [rows, ...]: rank >= 2 and every axis but
  // the first alike for all (else empty).
  std::vector<int64_t> stacked;

  int64_t total() const { return begin.back(); }
  int64_t offset(int64_t i) const { return shared ? 0 : begin[size_t(i)]; }
  int64_t elements(int64_t i) const { return shared ? begin[1] : begin[size_t(i) + 1] - begin[size_t(i)]; }
  const std::vector<int64_t>& shape(int64_t i) const { return shapes[shared ? 0 : size_t(i)]; }
};

// A ragged batch's product by weights of at least this many rows adds its dW at once, one GEMM
// over its rows (none kept); fewer rows are kept for the deferred GEMM, as a static batch's.
constexpr int64_t kRowsForDwNow = 256;

std::vector<int64_t> one_row(std::vector<int64_t> shape) {
  shape[0] = 1;
  return shape;
}

}  // namespace

class ReverseMode::Ragged {
 public:
  Ragged(ReverseMode& m, int b, const analysis::StaticBlock& s, const int* ids, int64_t B)
      : m_(m), f_(*m.forward_), b_(b), s_(s), ids_(ids), B_(B) {}

  void run() {
    bind_attrs();
    read_in_place();
    arguments();
    values();
    seed();
    for (size_t k = s_.ops.size(); k-- > 0;) adjoint(k);
    send();
  }

 private:
  // The attributes of operators whose attributes name sizes, per instance.
  void bind_attrs() {
    const size_t S = s_.sizes.size();
    bound_.assign(s_.ops.size(), {});
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      const OpAttrs& a = s_.ops[k].rhs->attrs;
      if (a.sizes == 0) continue;
      for (int64_t i = 0; i < B_; ++i) bound_[k].push_back(bind_attr_sizes(a, s_.sizes.data(), sizes(i), S));
    }
  }
  const int64_t* sizes(int64_t i) const { return f_.sizes(ids_[i]); }
  const OpAttrs& attrs(size_t k, int64_t i) const {
    return bound_[k].empty() ? s_.ops[k].rhs->attrs : bound_[k][size_t(i)];
  }

  // v's shapes per instance (one when shared) and where each instance's elements begin.
  void lay_out(RaggedValue& v, const std::vector<int64_t>& shape, bool shared) const {
    const size_t S = s_.sizes.size();
    v.shared = shared;
    v.shapes.clear();
    v.begin.assign(1, 0);
    for (int64_t i = 0; i < (shared ? 1 : B_); ++i) {
      v.shapes.push_back(bind_sizes(shape, s_.sizes.data(), sizes(i), S));
      v.begin.push_back(v.begin.back() + num_elements(v.shapes.back()));
    }
    v.stacked.clear();
    if (shared || shape.size() < 2) return;
    int64_t rows = 0;
    for (const std::vector<int64_t>& d : v.shapes) {
      if (!std::equal(d.begin() + 1, d.end(), v.shapes[0].begin() + 1)) return;
      rows += d[0];
    }
    v.stacked = v.shapes[0];
    v.stacked[0] = rows;
  }

  RaggedValue& operand(const analysis::BlockOperand& o) { return o.local ? vals_[o.index] : args_[o.index]; }
  float*& adjoint_slot(const analysis::BlockOperand& o) { return o.local ? dval_[o.index] : darg_[o.index]; }
  // The adjoint of operand `o`, zeroed when first reached.
  float* adjoint_of(const analysis::BlockOperand& o) {
    float*& d = adjoint_slot(o);
    if (!d) d = m_.alloc(operand(o).total(), true);
    return d;
  }

  // Step 1: a param's matrix that every instance reads is shared, any other argument stacked; an
  // argument none of whose instances' adjoints goes anywhere (a constant) gets none.
  void arguments() {
    args_.assign(s_.args.size(), RaggedValue{});
    receives_.assign(s_.args.size(), 0);
    scalar_.assign(s_.args.size(), 0);
    for (size_t e = 0; e < s_.args.size(); ++e) {
      RaggedValue& a = args_[e];
      for (int64_t i = 0; i < B_ && !receives_[e]; ++i) receives_[e] = m_.receives(f_.arg(ids_[i], e)) ? 1 : 0;
      const float* first = f_.data(f_.arg(ids_[0], e));
      if (!receives_[e] && !is_ragged(s_.args[e].shape) && num_elements(s_.args[e].shape) == 1) {
        bool same = true;
        for (int64_t i = 1; i < B_ && same; ++i) same = *f_.data(f_.arg(ids_[i], e)) == *first;
        scalar_[e] = same ? 1 : 0;
      }
      bool shared = !is_ragged(s_.args[e].shape) && m_.ranges_->find_param(first).first >= 0;
      for (int64_t i = 1; i < B_ && shared; ++i) shared = f_.data(f_.arg(ids_[i], e)) == first;
      lay_out(a, s_.args[e].shape, shared);
      if (shared) {
        a.data = const_cast<float*>(first);
        continue;
      }
      a.data = m_.alloc(a.total());
      for (int64_t i = 0; i < B_; ++i)
        std::memcpy(a.data + a.begin[size_t(i)], f_.data(f_.arg(ids_[i], e)),
                    static_cast<size_t>(a.elements(i)) * sizeof(float));
    }
  }

  // Whether operator k runs once over the stacked rows: its value and every stacked operand stack
  // ([rows, ...]), each instance's operands have its result's rows, and the operator acts along the
  // other axes (stackable, on one row of each), with attributes alike for all instances.
  bool on_rows(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    if (v.shared || v.stacked.empty() || !bound_[k].empty()) return false;
    std::vector<BatchValue> rows;
    rows.reserve(op.operands.size());
    for (const analysis::BlockOperand& o : op.operands) {
      const RaggedValue& x = operand(o);
      if (x.shared) {
        rows.push_back(BatchValue{true, x.shapes[0], nullptr, 0});
        continue;
      }
      if (x.stacked.empty() || x.stacked[0] != v.stacked[0]) return false;
      for (int64_t i = 0; i < B_; ++i)
        if (x.shapes[size_t(i)][0] != v.shapes[size_t(i)][0]) return false;
      rows.push_back(BatchValue{false, one_row(x.shapes[0]), nullptr, 0});
    }
    std::vector<const BatchValue*> in;
    for (const BatchValue& r : rows) in.push_back(&r);
    return stackable(op.rhs->op, one_row(v.shapes[0]), op.rhs->attrs, in);
  }

  // Where the forward kept operator k's value (a run that keeps its values stores every value its
  // plan stores on its own: analysis::stores_own_value), or null.
  const float* kept(size_t k) const {
    const float* base = f_.output(b_, int(k));
    return base ? base + f_.output_offset(b_, int(k), f_.row(ids_[0])) : nullptr;
  }

  // For x * c of x's shape by a scalar constant c (which has no adjoint: an operator's value, or an
  // argument of one element, the same for every instance, that receives none: scalar_): x's
  // operand (0 or 1), else -1. Its adjoint (kernel_adjoint) reads c's value only (the first
  // instance's).
  int scaled_operand(size_t k) const {
    const analysis::BlockOp& op = s_.ops[k];
    if (op.rhs->op != OpId::Mul) return -1;
    auto constant = [&](const analysis::BlockOperand& o) {
      if (!o.local) return scalar_[size_t(o.index)] != 0;
      const analysis::BlockOp& c = s_.ops[size_t(o.index)];
      return !differentiable(c.rhs->op) && !is_ragged(c.shape) && num_elements(c.shape) == 1 &&
             bound_[size_t(o.index)].empty();
    };
    for (int x = 0; x < 2; ++x) {
      const analysis::BlockOperand& o = op.operands[size_t(x)];
      const std::vector<int64_t>& shape = o.local ? s_.ops[size_t(o.index)].shape : s_.args[size_t(o.index)].shape;
      if (constant(op.operands[size_t(1 - x)]) && shape == op.shape) return x;
    }
    return -1;
  }

  // Which values the adjoints read (adjoint_reads), with the operands of those that are computed
  // again here because the forward did not keep them.
  std::vector<uint8_t> read_values() const {
    std::vector<uint8_t> read(s_.ops.size(), 0);
    for (size_t k = s_.ops.size(); k-- > 0;) {
      const analysis::BlockOp& op = s_.ops[k];
      bool operands = false;
      if (differentiable(op.rhs->op)) {
        const AdjointReads r = adjoint_reads(op.rhs->op);
        read[k] |= r.value ? 1 : 0;
        operands = r.operands;
      }
      const int scaled = scaled_operand(k);
      if (scaled >= 0 && !(read[k] && !kept(k))) {  // only the constant
        const analysis::BlockOperand& c = op.operands[size_t(1 - scaled)];
        if (c.local) read[size_t(c.index)] = 1;
        continue;
      }
      operands = operands || (read[k] && !kept(k));
      if (!operands) continue;
      for (analysis::BlockOperand o : op.operands) {
        while (o.local && in_place_[size_t(o.index)]) o = s_.ops[size_t(o.index)].operands[0];  // its base's
        if (o.local) read[size_t(o.index)] = 1;
      }
    }
    return read;
  }

  // The instances of operator k's value v where `base`, a batch output of the forward (a value or an
  // adjoint), holds them: in place when they lie one after another there in the batch's order, as v
  // lays them out (a shared value: the first instance's), else copied into v's layout.
  template <typename T>
  T* in_batch_order(T* base, size_t k, const RaggedValue& v) {
    auto at = [&](int64_t i) { return f_.output_offset(b_, int(k), f_.row(ids_[i])); };
    bool in_place = true;
    for (int64_t i = 1; i < B_ && in_place && !v.shared; ++i) in_place = at(i) - at(0) == v.begin[size_t(i)];
    if (in_place) return base + at(0);
    float* d = m_.alloc(v.total());
    for (int64_t i = 0; i < B_; ++i) std::copy_n(base + at(i), v.elements(i), d + v.begin[size_t(i)]);
    return d;
  }

  // Step 2: the operators' values the adjoints read: the forward's where it kept them, else
  // computed again, once for a shared one, over the rows where on_rows, else instance by instance.
  void values() {
    const PackedIndex& packed = f_.packed();
    vals_.assign(s_.ops.size(), RaggedValue{});
    rows_.assign(s_.ops.size(), 0);
    const std::vector<uint8_t> read = read_values();
    std::vector<Tensor> in_t;
    std::vector<const Tensor*> in_p;
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      const analysis::BlockOp& op = s_.ops[k];
      bool shared = !is_ragged(op.shape) && bound_[k].empty();
      for (const analysis::BlockOperand& o : op.operands) shared = shared && operand(o).shared;
      RaggedValue& v = vals_[k];
      lay_out(v, op.shape, shared);
      rows_[k] = on_rows(k) ? 1 : 0;
      if (read[k] && kept(k)) {
        v.data = const_cast<float*>(in_batch_order(f_.output(b_, int(k)), k, v));  // read only
        continue;
      }
      if (in_place_[k]) continue;  // read where its base lies, value and adjoint
      v.data = m_.alloc(v.total());
      if (!read[k]) continue;  // its storage is there for its adjoint's views, never read
      const ReferenceKernel kernel = reference_kernel(op.rhs->op);
      auto call = [&](int64_t i, bool stacked) {
        in_t.clear();
        for (const analysis::BlockOperand& o : op.operands) {
          const RaggedValue& x = operand(o);
          in_t.push_back(view(packed, stacked && !x.shared ? x.stacked : x.shape(i), x.data + x.offset(i)));
        }
        in_p.clear();
        for (const Tensor& t : in_t) in_p.push_back(&t);
        Tensor out = view(packed, stacked ? v.stacked : v.shape(i), v.data + v.offset(i));
        kernel(attrs(k, i), in_p, out);
      };
      if (product_per_instance(k)) {  // its operands may be views read in place
        product_value(k);
        continue;
      }
      if (v.shared || rows_[k]) {
        call(0, rows_[k] != 0);
        continue;
      }
      for (int64_t i = 0; i < B_; ++i) call(i, false);
    }
  }

  // Step 3, first: the adjoints of the block's outputs, read where they lie when the instances'
  // lie one after another as here.
  void seed() {
    dval_.assign(s_.ops.size(), nullptr);
    darg_.assign(s_.args.size(), nullptr);
    for (size_t k = 0; k < s_.ops.size(); ++k) {
      float* g = s_.ops[k].escapes ? m_.adjoints_[b_][k] : nullptr;
      if (!g) continue;
      const RaggedValue& v = vals_[k];
      auto at = [&](int64_t i) { return f_.output_offset(b_, int(k), f_.row(ids_[i])); };
      if (v.shared) {
        float* d = dval_[k] = m_.alloc(v.total(), true);
        for (int64_t i = 0; i < B_; ++i) add(d, g + at(i), v.total());
        continue;
      }
      // Where in place, no batch adds to it any more: its readers were differentiated before.
      dval_[k] = in_batch_order(g, k, v);
    }
  }

  // Step 3, then: operator k's adjoint. A product by a param's matrix takes the weights' path over
  // every instance's rows; an add passes its adjoint on to an operand of its shape that has none.
  void adjoint(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    if (product_per_instance(k)) return product_adjoint(k);
    if (!dval_[k] || !differentiable(op.rhs->op)) return;
    if (op.rhs->op == OpId::MergeHeads && op.operands[0].local && merged_into_[size_t(op.operands[0].index)] >= 0)
      return;
    if (op.rhs->op == OpId::MatMul && !v.shared) {
      const analysis::BlockOperand& xo = op.operands[0];
      const RaggedValue& x = operand(xo);
      const RaggedValue& w = operand(op.operands[1]);
      if (!x.shared && w.shared &&
          m_.product_by_weights(w.data, w.shapes[0], x.data, x.shapes[0].back(), dval_[k],
                                xo.local || receives_[xo.index] ? &adjoint_slot(xo) : nullptr, x.total(),
                                x.total() >= kRowsForDwNow * x.shapes[0].back()))
        return;
    }
    if (kernel_adjoint(k)) return;
    const int taken = take_over_add(k);
    if (add_adjoint(k, taken)) return;
    std::vector<float*> din;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      const analysis::BlockOperand& o = op.operands[j];
      din.push_back(int(j) == taken || !wanted(o) ? nullptr : adjoint_of(o));
    }
    std::vector<TensorArg<float>> targs;
    std::vector<float*> dins;
    const bool stacked = rows_[k] != 0;
    for (int64_t i = 0; i < (v.shared || stacked ? 1 : B_); ++i) {
      targs.clear();
      dins.clear();
      for (size_t j = 0; j < op.operands.size(); ++j) {
        const RaggedValue& x = operand(op.operands[j]);
        targs.push_back({stacked && !x.shared ? x.stacked : x.shape(i), x.data + x.offset(i)});
        dins.push_back(din[j] ? din[j] + x.offset(i) : nullptr);
      }
      const std::vector<int64_t>& out_shape = stacked ? v.stacked : v.shape(i);
      acrobat::adjoint<float>(op.rhs->op, attrs(k, i), targs, out_shape, v.data + v.offset(i),
                              dval_[k] + v.offset(i), dins);
    }
  }

  // A product of two per-instance operands, one GEMM per instance and matrix of a stack in the
  // forward (the plan's GemmPerInstance: attention's Q K^T and P V).
  bool product_per_instance(size_t k) const {
    return s_.ops[k].rhs->op == OpId::MatMul && plan().ops[k].step == analysis::RaggedStep::GemmPerInstance;
  }
  const analysis::RaggedPlan& plan() const { return m_.plan_->ragged[size_t(s_.id)]; }

  // The views the products per instance read where their bases lie, as the forward does (column
  // slices, heads and transposes: the plan's views), value and adjoint alike: a view none of whose
  // readers is anything but such a product or such a view, and that does not escape. Its value is
  // not computed again and its adjoint goes straight into its base's. And the products whose
  // adjoint is read where it lies in the adjoint of the merge_heads reading them (their one
  // reader), which then has no step of its own.
  void read_in_place() {
    const size_t n = s_.ops.size();
    std::vector<std::vector<size_t>> readers(n);
    for (size_t r = 0; r < n; ++r)
      for (const analysis::BlockOperand& o : s_.ops[r].operands)
        if (o.local) readers[size_t(o.index)].push_back(r);
    in_place_.assign(n, 0);
    merged_into_.assign(n, -1);
    for (size_t k = n; k-- > 0;) {  // a view's readers are decided before it
      if (plan().ops[k].step != analysis::RaggedStep::View || s_.ops[k].escapes) continue;
      bool all = !readers[k].empty();
      for (size_t r : readers[k]) all = all && (product_per_instance(r) || in_place_[r]);
      in_place_[k] = all ? 1 : 0;
    }
    for (size_t m = 0; m < n; ++m) {
      const analysis::BlockOp& op = s_.ops[m];
      if (op.rhs->op != OpId::MergeHeads || !op.operands[0].local) continue;
      const auto c = size_t(op.operands[0].index);
      if (product_per_instance(c) && readers[c].size() == 1 && !s_.ops[c].escapes) merged_into_[c] = int(m);
    }
  }

  // Instance i of operand o, or of its adjoint (null where it has none), where it lies: packed, or
  // a view of its base (read_in_place) as the forward's views lay it.
  Strided strided(const analysis::BlockOperand& o, int64_t i, bool adjoint) {
    if (o.local && in_place_[size_t(o.index)]) {
      const auto k = size_t(o.index);
      const Strided u = strided(s_.ops[k].operands[0], i, adjoint);
      return u.p ? through_view(u, plan().ops[k].view, s_.ops[k].rhs->attrs, vals_[k].shape(i).data()) : u;
    }
    const RaggedValue& x = operand(o);
    const std::vector<int64_t>& d = x.shape(i);
    float* base = adjoint ? (wanted(o) ? adjoint_of(o) : nullptr) : x.data;
    return base ? packed_value(base + x.offset(i), d.data(), d.size()) : Strided{};
  }

  // Instance i's sizes of operator k = op(A) @ op(B), as the reference's matmul: A a stack [H, M, K]
  // or a matrix (H = 1), B a stack of H matrices (b_stacked) or one matrix; C [.., M, N].
  struct ProductDims {
    int64_t H, M, K, N;
    bool b_stacked;
  };
  ProductDims product_dims(size_t k, int64_t i) {
    const analysis::BlockOp& op = s_.ops[k];
    const std::vector<int64_t>& as = operand(op.operands[0]).shape(i);
    return {as.size() == 3 ? as[0] : 1, as[as.size() - 2], as.back(), vals_[k].shape(i).back(),
            operand(op.operands[1]).shape(0).size() == 3};
  }

  // The value of operator k = op(A) @ op(B) per instance and matrix of a stack, as the forward
  // computes it (its operands packed or views read in place).
  void product_value(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    for (int64_t i = 0; i < (v.shared ? 1 : B_); ++i) {
      const auto [H, M, K, N, b_stacked] = product_dims(k, i);
      const Strided A = strided(op.operands[0], i, false), B = strided(op.operands[1], i, false);
      for (int64_t h = 0; h < H; ++h)
        kernels::gemm_strided(A.trans, B.trans, int(M), int(N), int(K), A.p + h * A.hs, int(A.ld),
                              B.p + (b_stacked ? h * B.hs : 0), int(B.ld), v.data + v.offset(i) + h * M * N, int(N),
                              false);
    }
  }

  // Operator k = op(A) @ op(B) per instance and matrix of a stack, each operand packed or a view
  // read in place: dA += dC op(B)^T, dB += op(A)^T dC, added where A's and B's adjoints lie (a
  // view's: in its base's), dC read where it lies (in the adjoint of the merge_heads reading C,
  // head h at column h * E, where merged_into_).
  void product_adjoint(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    const int reader = merged_into_[k];
    const float* dc = reader >= 0 ? dval_[size_t(reader)] : dval_[k];
    if (!dc) return;
    const analysis::BlockOperand &ao = op.operands[0], &bo = op.operands[1];
    for (int64_t i = 0; i < (v.shared ? 1 : B_); ++i) {
      const auto [H, M, K, N, b_stacked] = product_dims(k, i);
      Strided dC{const_cast<float*>(dc) + v.offset(i), M * N, N, false};
      if (reader >= 0) dC = {const_cast<float*>(dc) + vals_[size_t(reader)].offset(i), N, H * N, false};
      const Strided A = strided(ao, i, false), B = strided(bo, i, false);
      const Strided dA = strided(ao, i, true), dB = strided(bo, i, true);
      for (int64_t h = 0; h < H; ++h) {
        const float* a = A.p + h * A.hs;
        const float* b = B.p + (b_stacked ? h * B.hs : 0);
        const float* g = dC.p + h * dC.hs;
        const int m = int(M), nn = int(N), kk = int(K), lg = int(dC.ld);
        if (dA.p) {
          float* d = dA.p + h * dA.hs;
          if (!A.trans)
            kernels::gemm_strided(false, !B.trans, m, kk, nn, g, lg, b, int(B.ld), d, int(dA.ld), true);
          else  // A's stored [K, M]: op(B) dC^T
            kernels::gemm_strided(B.trans, true, kk, m, nn, b, int(B.ld), g, lg, d, int(dA.ld), true);
        }
        if (dB.p) {
          float* d = dB.p + (b_stacked ? h * dB.hs : 0);
          if (!B.trans)
            kernels::gemm_strided(!A.trans, false, kk, nn, m, a, int(A.ld), g, lg, d, int(dB.ld), true);
          else  // B's stored [N, K]: dC^T op(A)
            kernels::gemm_strided(true, A.trans, nn, kk, m, g, lg, a, int(A.ld), d, int(dB.ld), true);
        }
      }
    }
  }

  // Whether operand o's adjoint goes anywhere (not a constant argument).
  bool wanted(const analysis::BlockOperand& o) const { return o.local || receives_[o.index]; }

  // Operator k's adjoint by a SIMD kernel, where one serves it: an elementwise operator of one
  // operand laid out as its value (unary_backward_kernel, or a product by a constant scalar) and a
  // softmax over the whole batch's buffer at once, a layer norm over the stacked rows. Where x has
  // no adjoint yet, an elementwise operator's or softmax's is written over y's, which x then takes
  // over (y's is not read again, as in take_over_add), and a layer norm's written into fresh memory;
  // else added to x's. False for the others.
  bool kernel_adjoint(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    const OpId id = op.rhs->op;
    if (id == OpId::LayerNorm) return !v.shared && rows_[k] && layer_norm_adjoint(k);
    const std::optional<kernels::UnaryBackward> f = unary_backward_kernel(id);
    size_t xi = 0;
    float scale = 0;
    if (id == OpId::Mul) {
      const int x = scaled_operand(k);
      if (x < 0) return false;
      xi = size_t(x);
      scale = *operand(op.operands[1 - xi]).data;
    } else if (v.shared || (!f && id != OpId::Softmax && id != OpId::LogSoftmax)) {
      return false;
    }
    // A product by a constant takes this path whenever scaled_operand says so (read_values
    // computes only the constant's value for it), shared or not.
    const analysis::BlockOperand& xo = op.operands[xi];
    const RaggedValue& x = operand(xo);
    if (x.shared != v.shared || x.shapes != v.shapes) return false;
    if (!wanted(xo)) return true;
    float*& dx = adjoint_slot(xo);
    const bool fresh = !dx;
    if (fresh) dx = dval_[k];
    const float* dy = dval_[k];
    const auto n = static_cast<size_t>(v.total());
    if (f) {
      kernels::unary_backward(*f, x.data, v.data, dy, dx, n, !fresh);
    } else if (id == OpId::Mul) {
      if (fresh)
        for (size_t j = 0; j < n; ++j) dx[j] = dy[j] * scale;
      else
        for (size_t j = 0; j < n; ++j) dx[j] += dy[j] * scale;
    } else {
      // Softmax of x * c whose adjoint goes to x's alone (scaled_into): written times c, as x's.
      const ScaledInto into = fresh ? scaled_into(k) : ScaledInto{};
      const analysis::BlockOp* product = into.op >= 0 ? &s_.ops[size_t(into.op)] : nullptr;
      const float c = product ? *operand(product->operands[1 - into.x]).data : 1.0f;
      for (int64_t i = 0; i < B_; ++i) {
        const int64_t at = v.offset(i), cols = v.shape(i).back(), rows = cols > 0 ? v.elements(i) / cols : 0;
        const int r = static_cast<int>(rows), n = static_cast<int>(cols);
        if (id == OpId::Softmax)
          kernels::softmax_backward(v.data + at, dy + at, dx + at, r, n, !fresh, c);
        else
          kernels::log_softmax_backward(v.data + at, dy + at, dx + at, r, n, !fresh);
      }
      if (product) {  // x takes the adjoint over; the product by c has no step of its own
        adjoint_slot(product->operands[into.x]) = dx;
        dval_[size_t(into.op)] = nullptr;
      }
    }
    return true;
  }

  // For softmax k of y = x * c (a product by a constant scalar, scaled_operand: attention's scaled
  // scores) where neither y nor x has an adjoint yet and nothing between them reads either: the
  // product's operator and x's operand in it, else op -1. Its adjoint, c times softmax's written
  // into x's, is then computed in softmax's pass: one pass over the scores instead of two, to the
  // same bits (c times the float adjoint of y).
  struct ScaledInto {
    int op = -1;
    size_t x = 0;
  };
  ScaledInto scaled_into(size_t k) {
    const analysis::BlockOperand& yo = s_.ops[k].operands[0];
    if (s_.ops[k].rhs->op != OpId::Softmax || !yo.local) return {};
    const size_t j = size_t(yo.index);
    const int xi = scaled_operand(j);
    if (xi < 0) return {};
    const analysis::BlockOperand& xo = s_.ops[j].operands[size_t(xi)];
    const RaggedValue& x = operand(xo);
    if (!wanted(xo) || adjoint_slot(xo) || (xo.local && in_place_[size_t(xo.index)]) || x.shared != vals_[j].shared ||
        x.shapes != vals_[j].shapes)
      return {};
    for (size_t m = j + 1; m < k; ++m)
      for (const analysis::BlockOperand& o : s_.ops[m].operands)
        if ((o.local && size_t(o.index) == j) || (o.local == xo.local && o.index == xo.index)) return {};
    return {int(j), size_t(xi)};
  }

  // A layer norm over the stacked rows, by gamma and beta shared by every instance.
  bool layer_norm_adjoint(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    const analysis::BlockOperand& xo = op.operands[0];
    const RaggedValue &x = operand(xo), &gamma = operand(op.operands[1]), &beta = operand(op.operands[2]);
    const int64_t cols = v.stacked.back();
    if (x.shared || !gamma.shared || !beta.shared || gamma.total() != cols || beta.total() != cols) return false;
    float* dx = nullptr;
    bool accumulate = true;
    if (wanted(xo)) {
      float*& d = adjoint_slot(xo);
      accumulate = d != nullptr;
      if (!d) d = m_.alloc(x.total());
      dx = d;
    }
    float* dgamma = wanted(op.operands[1]) ? adjoint_of(op.operands[1]) : nullptr;
    float* dbeta = wanted(op.operands[2]) ? adjoint_of(op.operands[2]) : nullptr;
    kernels::layer_norm_backward(x.data, gamma.data, dval_[k], kernels::kLayerNormEps,
                                 static_cast<int>(v.total() / cols), static_cast<int>(cols), dx, accumulate, dgamma,
                                 dbeta);
    return true;
  }

  // y = a + b over the rows where a has y's shapes and no adjoint yet: a's adjoint is y's (y's is
  // not read again; a's other readers, differentiated later, add to it). The operand, or -1.
  int take_over_add(size_t k) {
    const analysis::BlockOp& op = s_.ops[k];
    if (op.rhs->op != OpId::Add || !rows_[k]) return -1;
    const analysis::BlockOperand &o0 = op.operands[0], &o1 = op.operands[1];
    if (o0.local == o1.local && o0.index == o1.index) return -1;
    for (int j = 0; j < 2; ++j) {
      const analysis::BlockOperand& o = op.operands[size_t(j)];
      const RaggedValue& x = operand(o);
      if (adjoint_slot(o) || x.shared || x.shapes != vals_[k].shapes) continue;
      adjoint_slot(o) = dval_[k];
      return j;
    }
    return -1;
  }

  // y = a + b over the rows, the operand `taken` (take_over_add's, or -1) aside: an operand of y's
  // shapes adds y's adjoint (takes a copy of it where it has none yet), a row every instance shares
  // (a bias) adds y's adjoint's rows one after the other, in the order and so to the bits of the
  // reference's adjoint. False, with nothing done, for other operands.
  bool add_adjoint(size_t k, int taken) {
    const analysis::BlockOp& op = s_.ops[k];
    const RaggedValue& v = vals_[k];
    if (op.rhs->op != OpId::Add || !rows_[k] || v.shared) return false;
    const analysis::BlockOperand &o0 = op.operands[0], &o1 = op.operands[1];
    if (o0.local == o1.local && o0.index == o1.index) return false;
    const int64_t cols = v.stacked.back();
    auto row = [&](const RaggedValue& x) {
      const std::vector<int64_t>& s = x.shapes[0];
      return x.shared && x.total() == cols && (s.size() == 1 || (s.size() == 2 && s[0] == 1));
    };
    for (int j = 0; j < 2; ++j) {
      const RaggedValue& x = operand(op.operands[size_t(j)]);
      if (j != taken && wanted(op.operands[size_t(j)]) && !(!x.shared && x.shapes == v.shapes) && !row(x))
        return false;
    }
    const float* dy = dval_[k];
    const auto n = static_cast<size_t>(v.total());
    for (int j = 0; j < 2; ++j) {
      const analysis::BlockOperand& o = op.operands[size_t(j)];
      if (j == taken || !wanted(o)) continue;
      if (row(operand(o))) {
        float* db = adjoint_of(o);
        for (size_t r = 0; r < n; r += size_t(cols))
          kernels::binary(kernels::BinaryOp::Add, db, dy + r, db, size_t(cols));
        continue;
      }
      float*& d = adjoint_slot(o);
      if (d) {
        kernels::binary(kernels::BinaryOp::Add, d, dy, d, n);
      } else {
        d = m_.alloc(int64_t(n));
        std::copy_n(dy, n, d);
      }
    }
    return true;
  }

  // Step 4: each argument's adjoint to where it came from, instance by instance.
  void send() {
    for (size_t e = 0; e < s_.args.size(); ++e) {
      if (!darg_[e]) continue;
      const RaggedValue& a = args_[e];
      for (int64_t i = 0; i < (a.shared ? 1 : B_); ++i)
        m_.send(f_.arg(ids_[i], e), darg_[e] + a.offset(i), a.elements(i));
    }
  }

  ReverseMode& m_;
  const ForwardRecord& f_;
  const int b_;
  const analysis::StaticBlock& s_;
  const int* const ids_;
  const int64_t B_;
  std::vector<std::vector<OpAttrs>> bound_;  // per operator: per instance when its attributes name sizes
  std::vector<RaggedValue> vals_, args_;
  std::vector<uint8_t> rows_;       // per operator: on_rows
  std::vector<uint8_t> in_place_;   // per operator: a view read where its base lies (read_in_place)
  std::vector<int> merged_into_;    // per operator: a product's merge_heads reader, whose adjoint is its, or -1
  std::vector<uint8_t> receives_;   // per argument: some instance's adjoint goes somewhere (not a constant)
  std::vector<uint8_t> scalar_;     // per argument: one element, the same for all, receiving nothing
  std::vector<float*> dval_, darg_;  // the adjoints of the operators and of the arguments
};

void ReverseMode::differentiate_ragged(int b, const analysis::StaticBlock& s, const int* ids, int64_t B) {
  grad_values_.reset();
  Ragged(*this, b, s, ids, B).run();
}

}  // namespace acrobat
