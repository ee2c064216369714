#include "runtime/batched_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "acrobat/kernels.h"
#include "runtime/arena.h"
#include "runtime/batched_kernels.h"
#include "runtime/big_stack.h"
#include "runtime/interpreter.h"

namespace acrobat {

const char* scheduler_name(Scheduler s) {
  switch (s) {
    case Scheduler::InlineDepth: return "inline-depth";
    case Scheduler::Depth: return "depth";
    case Scheduler::Agenda: return "agenda";
  }
  return "?";
}

Scheduler parse_scheduler(const std::string& name) {
  for (Scheduler s : {Scheduler::InlineDepth, Scheduler::Depth, Scheduler::Agenda})
    if (name == scheduler_name(s)) return s;
  throw UserError("unknown scheduler '" + name + "' (expected inline-depth, depth or agenda)");
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool is_tensor_op(const ir::Rhs& r) {
  return r.kind == ir::RhsKind::Op && op_info(r.op).op_class != OpClass::HostRead;
}
// Operators with tensor operands are batched; constants (no operands) are computed once.
bool is_batched_op(const ir::Rhs& r) { return is_tensor_op(r) && !r.args.empty(); }
bool ends_segment(const ir::Rhs& r) {
  return r.kind == ir::RhsKind::Call || r.kind == ir::RhsKind::If ||
         r.kind == ir::RhsKind::Match ||
         (r.kind == ir::RhsKind::Op && op_info(r.op).op_class == OpClass::HostRead);
}

void collect_uses(const ir::Block& b, size_t from, std::set<int>& used);
void collect_atom(const ir::Atom& a, std::set<int>& used) {
  if (a.kind == ir::Atom::Var) used.insert(a.var);
}
void collect_rhs(const ir::Rhs& r, std::set<int>& used) {
  for (const auto& a : r.args) collect_atom(a, used);
  collect_atom(r.callee, used);
  collect_uses(r.then_block, 0, used);
  collect_uses(r.else_block, 0, used);
  for (const auto& c : r.clauses) collect_uses(c.body, 0, used);
}
// Variables read by bindings[from..] of `b` (nested blocks included) and by its result.
void collect_uses(const ir::Block& b, size_t from, std::set<int>& used) {
  for (size_t i = from; i < b.bindings.size(); ++i) collect_rhs(*b.bindings[i].rhs, used);
  collect_atom(b.result, used);
}

struct Operand {
  bool local;  // the output of an earlier operator of the segment, else an external slot
  int index;
};

struct SegmentOp {
  const ir::Rhs* rhs;
  std::vector<Operand> operands;
  std::vector<int64_t> shape;
  int64_t size;
  bool escapes;
  // A slice whose per-instance result is one contiguous run of its operand's (an operator of the
  // same segment) is not copied: its output is a view into the operand's rows.
  bool view = false;
  // A matmul by shared weights whose only use is the next operator, an add of a shared row (a
  // bias): the matmul accumulates onto the broadcast bias and the add is skipped.
  int bias_slot = -1;     // on the matmul: the add's external slot holding the bias
  bool fused = false;     // on the add: computed by the matmul before it
};

// Where a batch left an operator's outputs: instance r at data + r * stride.
struct Rows {
  float* data = nullptr;
  int64_t stride = 0;
};

struct Segment {
  int id;
  std::string name;  // where its first operator is in the model
  size_t begin, end;  // bindings [begin, end) of the block
  std::vector<SegmentOp> ops;
  std::vector<std::vector<int64_t>> external_shapes;
  // Slots read only as a matmul's right operand are never gathered: scattered weights (parameter
  // slices chosen by a host int) are grouped by matrix instead. Slots read only by concat are
  // not gathered either: concat copies scattered instances from where they lie.
  std::vector<bool> weights_only;
  std::vector<bool> concat_only;
  bool built = false;  // operands classified (on the first recording)
};

struct Node {
  int segment;
  int depth = 0;
  size_t external_begin;  // into State::externals
  int batch = -1;         // executed batch, -1 while pending
  int row = 0;            // the node's row within its batch
};

struct Batch {
  int segment;
  std::vector<Rows> outputs;  // per segment operator; valid for escaping ones
};

}  // namespace

struct BatchedEngine::State {
  std::unordered_map<const ir::Binding*, std::unique_ptr<Segment>> segments_by_site;
  std::vector<Segment*> segments;
  std::map<const ir::Rhs*, Value> constants;
  Arena arena;    // outputs that outlive their batch: one run
  Arena scratch;  // gathered panels and outputs used only inside their batch
  // One run:
  std::vector<Node> nodes;
  std::vector<Value> externals;
  std::vector<Batch> batches;
  size_t first_pending = 0;
  std::vector<std::vector<std::vector<int>>> buckets;  // inline depth: [depth][segment] -> nodes

  void reset_run() {
    nodes.clear();
    externals.clear();
    batches.clear();
    buckets.clear();
    first_pending = 0;
    arena.reset();
    arena.reset_peak();
    scratch.reset();
    scratch.reset_peak();
  }

  Segment& segment_at(const ir::Block& block, size_t begin) {
    auto& slot = segments_by_site[&block.bindings[begin]];
    if (slot) return *slot;
    slot = std::make_unique<Segment>();
    Segment& s = *slot;
    s.id = static_cast<int>(segments.size());
    for (size_t j = begin; j < block.bindings.size() && s.name.empty(); ++j)
      if (is_batched_op(*block.bindings[j].rhs)) s.name = block.bindings[j].rhs->span.begin.str();
    s.begin = begin;
    s.end = begin;
    for (size_t j = begin; j < block.bindings.size() && !ends_segment(*block.bindings[j].rhs); ++j)
      if (is_tensor_op(*block.bindings[j].rhs)) s.end = j + 1;
    // Escape analysis: what later code reads, propagated back through the host-level bindings
    // inside the segment (a tuple that escapes makes its fields escape).
    std::set<int> used;
    collect_uses(block, s.end, used);
    for (size_t j = s.end; j-- > begin;) {
      const ir::Binding& b = block.bindings[j];
      if (!is_tensor_op(*b.rhs) && used.count(b.var)) collect_rhs(*b.rhs, used);
    }
    for (size_t j = begin; j < s.end; ++j) {
      const ir::Binding& b = block.bindings[j];
      if (!is_batched_op(*b.rhs)) continue;
      s.ops.push_back(SegmentOp{b.rhs.get(), {}, b.rhs->type->shape,
                                num_elements(b.rhs->type->shape), used.count(b.var) > 0});
    }
    segments.push_back(&s);
    return s;
  }

  float* output_of(const Value& v) const {
    const Node& n = nodes[v.i];
    const Rows& rows = batches[n.batch].outputs[v.slot];
    return rows.data + n.row * rows.stride;
  }
};

namespace {

// Matmul + bias-add pairs (see SegmentOp::bias_slot), decided on the first recording: the
// operands' kinds are known then, and whether the bias is one row for all instances is checked
// again for every batch.
void mark_bias_fusion(Segment& s) {
  std::vector<int> uses(s.ops.size(), 0);
  for (const auto& op : s.ops)
    for (const auto& o : op.operands)
      if (o.local) uses[o.index]++;
  for (size_t k = 0; k + 1 < s.ops.size(); ++k) {
    SegmentOp& mm = s.ops[k];
    SegmentOp& add = s.ops[k + 1];
    if (mm.rhs->op != OpId::MatMul || mm.escapes || uses[k] != 1 || mm.operands[1].local ||
        add.rhs->op != OpId::Add || add.shape != mm.shape || mm.shape.size() != 2)
      continue;
    for (int side = 0; side < 2; ++side) {
      const Operand& self = add.operands[side];
      const Operand& bias = add.operands[1 - side];
      if (!self.local || self.index != static_cast<int>(k) || bias.local) continue;
      const auto& bshape = s.external_shapes[bias.index];
      if (num_elements(bshape) != mm.shape[1] || bshape.back() != mm.shape[1]) continue;
      mm.bias_slot = bias.index;
      add.fused = true;
      break;
    }
  }
}

// Slices of a leading-1 axis region (the common [1, H] rows) become views; a view that escapes
// keeps the operator it views alive too.
void mark_views(Segment& s) {
  for (size_t k = s.ops.size(); k-- > 0;) {
    SegmentOp& op = s.ops[k];
    if (op.rhs->op != OpId::Slice || !op.operands[0].local) continue;
    const auto& in = s.ops[op.operands[0].index].shape;
    int axis = normalize_axis(op.rhs->attrs.ints[2], in.size());
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= in[d];
    if (outer != 1) continue;
    op.view = true;
    if (op.escapes) s.ops[op.operands[0].index].escapes = true;
  }
}

// Completes a segment's plan once its operands are classified (after its first recording).
void plan_segment(Segment& s) {
  mark_views(s);
  mark_bias_fusion(s);
  s.weights_only.assign(s.external_shapes.size(), true);
  s.concat_only.assign(s.external_shapes.size(), true);
  for (const auto& op : s.ops)
    for (size_t a = 0; a < op.operands.size(); ++a) {
      if (op.operands[a].local) continue;
      if (!(op.rhs->op == OpId::MatMul && a == 1)) s.weights_only[op.operands[a].index] = false;
      if (op.rhs->op != OpId::Concat) s.concat_only[op.operands[a].index] = false;
    }
}

// Runs one instance's host program, recording its tensor work into the engine state.
class RecordingInterpreter : public Interpreter {
 public:
  RecordingInterpreter(const ir::Module& m, const ParamStore& p, RunStats& stats,
                       BatchedEngine::State& state, Scheduler scheduler,
                       const std::function<void()>& flush)
      : Interpreter(m, p, stats), st_(state), scheduler_(scheduler), flush_(flush) {}

 protected:
  size_t tensor_ops(const ir::Block& block, size_t index, std::vector<Value>& frame) override {
    Segment& s = st_.segment_at(block, index);
    int node_id = static_cast<int>(st_.nodes.size());
    size_t external_begin = st_.externals.size();
    int depth = 0;
    size_t k = 0;
    for (size_t j = s.begin; j < s.end; ++j) {
      const ir::Binding& b = block.bindings[j];
      const ir::Rhs& r = *b.rhs;
      if (!is_batched_op(r)) {
        frame[b.var] = is_tensor_op(r) ? constant(r, frame) : host_binding(r, frame);
        continue;
      }
      SegmentOp& op = s.ops[k];
      for (size_t a = 0; a < r.args.size(); ++a) {
        const Value& v = frame[r.args[a].var];
        bool local = v.kind == Value::Kind::Lazy && v.i == node_id;
        if (!local) {
          if (v.kind == Value::Kind::Lazy) depth = std::max(depth, st_.nodes[v.i].depth);
          st_.externals.push_back(v);
        }
        if (!s.built) {
          op.operands.push_back(Operand{local, local ? v.slot
                                                     : static_cast<int>(s.external_shapes.size())});
          if (!local) s.external_shapes.push_back(st_.externals.back().kind == Value::Kind::Lazy
                                                      ? lazy_shape(st_.externals.back())
                                                      : st_.externals.back().tensor->shape);
        }
      }
      frame[b.var] = Value::lazy(node_id, static_cast<int32_t>(k));
      stats_.tensor_ops++;
      stats_.flops += r.flops;
      ++k;
    }
    if (!s.built) plan_segment(s);
    s.built = true;
    if (!s.ops.empty()) {
      Node n{s.id, depth + 1, external_begin};
      st_.nodes.push_back(n);
      if (scheduler_ == Scheduler::InlineDepth) {
        auto& buckets = st_.buckets;
        if (buckets.size() <= static_cast<size_t>(n.depth)) buckets.resize(n.depth + 1);
        auto& row = buckets[n.depth];
        if (row.size() <= static_cast<size_t>(s.id)) row.resize(s.id + 1);
        row[s.id].push_back(node_id);
      }
    }
    return s.end - s.begin;
  }

  const Tensor& tensor_contents(const Value& v) override {
    if (v.kind != Value::Kind::Lazy) return *v.tensor;
    if (st_.nodes[v.i].batch < 0) flush_();
    read_.shape = lazy_shape(v);
    read_.data = std::shared_ptr<float[]>(std::shared_ptr<float[]>(), st_.output_of(v));
    return read_;
  }

 private:
  const std::vector<int64_t>& lazy_shape(const Value& v) const {
    return st_.segments[st_.nodes[v.i].segment]->ops[v.slot].shape;
  }

  Value constant(const ir::Rhs& r, const std::vector<Value>& frame) {
    auto it = st_.constants.find(&r);
    if (it != st_.constants.end()) return it->second;
    return st_.constants[&r] = run_op(r, frame);
  }

  BatchedEngine::State& st_;
  Scheduler scheduler_;
  const std::function<void()>& flush_;
  Tensor read_;
};

// out[b] = a[b] @ W_b where the W_b are scattered matrices (parameter slices chosen by a host int,
// or per-instance matrices): instances sharing a matrix form one GEMM over their gathered rows.
void matmul_grouped(Arena& scratch, int64_t B, const BatchOperand& a,
                    const std::vector<const float*>& weights, const std::vector<int64_t>& out_shape,
                    float* out, RunStats& stats) {
  int64_t M = (*a.shape)[0], K = (*a.shape)[1], N = out_shape[1];
  int64_t a_stride = B == 1 ? M * K : a.stride;
  std::unordered_map<const float*, std::vector<int64_t>> groups;
  std::vector<const float*> order;
  for (int64_t b = 0; b < B; ++b) {
    auto& g = groups[weights[b]];
    if (g.empty()) order.push_back(weights[b]);
    g.push_back(b);
  }
  for (const float* w : order) {
    const std::vector<int64_t>& members = groups[w];
    int64_t g = static_cast<int64_t>(members.size());
    stats.kernel_calls++;
    if (g == 1) {
      int64_t b = members[0];
      kernels::gemm(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                    a.data + b * a_stride, static_cast<int>(K), w, static_cast<int>(N),
                    out + b * M * N, static_cast<int>(N), false);
      continue;
    }
    float* panel = scratch.alloc(static_cast<size_t>(g * M * K));
    float* result = scratch.alloc(static_cast<size_t>(g * M * N));
    for (int64_t i = 0; i < g; ++i)
      std::memcpy(panel + i * M * K, a.data + members[i] * a_stride, M * K * sizeof(float));
    kernels::gemm(static_cast<int>(g * M), static_cast<int>(N), static_cast<int>(K), panel,
                  static_cast<int>(K), w, static_cast<int>(N), result, static_cast<int>(N), false);
    for (int64_t i = 0; i < g; ++i)
      std::memcpy(out + members[i] * M * N, result + i * M * N, M * N * sizeof(float));
  }
}

// Executes one batch: the nodes (all of one segment, all ready) as one kernel call per operator.
void run_batch(BatchedEngine::State& st, int segment, const std::vector<int>& node_ids,
               RunStats& stats) {
  const Segment& s = *st.segments[segment];
  int64_t B = static_cast<int64_t>(node_ids.size());
  int batch_id = static_cast<int>(st.batches.size());
  for (size_t r = 0; r < node_ids.size(); ++r) {
    st.nodes[node_ids[r]].batch = batch_id;
    st.nodes[node_ids[r]].row = static_cast<int>(r);
  }
  st.batches.push_back(Batch{segment, std::vector<Rows>(s.ops.size())});
  st.scratch.reset();

  // External slots: shared, strided in place, or gathered into a panel.
  std::vector<BatchOperand> externals(s.external_shapes.size());
  std::vector<std::vector<const float*>> slot_rows(externals.size());
  for (size_t e = 0; e < externals.size(); ++e) {
    std::vector<const float*>& rows = slot_rows[e];
    rows.resize(B);
    int64_t n = num_elements(s.external_shapes[e]);
    const kernels::PackedWeights* packed = nullptr;
    for (int64_t b = 0; b < B; ++b) {
      const Value& v = st.externals[st.nodes[node_ids[b]].external_begin + e];
      if (v.kind == Value::Kind::Lazy) {
        rows[b] = st.output_of(v);
      } else {
        rows[b] = v.tensor->data.get();
        packed = v.tensor->packed.get();
      }
    }
    bool shared = true, strided = true;
    for (int64_t b = 1; b < B; ++b) {
      shared = shared && rows[b] == rows[0];
      strided = strided && rows[b] == rows[0] + b * n;
    }
    BatchOperand& op = externals[e];
    op.shape = &s.external_shapes[e];
    if (shared) {
      op.data = rows[0];
      op.stride = 0;
      op.packed = packed;
    } else if (strided) {
      op.data = rows[0];
      op.stride = n;
    } else if (s.weights_only[e]) {
      op.data = nullptr;  // scattered weights: see matmul_grouped
      op.stride = -1;
    } else if (s.concat_only[e]) {
      op.rows = rows.data();
    } else {
      float* panel = st.scratch.alloc(static_cast<size_t>(B * n));
      for (int64_t b = 0; b < B; ++b) std::memcpy(panel + b * n, rows[b], n * sizeof(float));
      op.data = panel;
      op.stride = n;
    }
  }

  std::vector<BatchOperand> in;
  std::vector<Rows>& outputs = st.batches[batch_id].outputs;
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const SegmentOp& op = s.ops[k];
    if (op.view) {
      const Rows& src = outputs[op.operands[0].index];
      const auto& in_shape = s.ops[op.operands[0].index].shape;
      int axis = normalize_axis(op.rhs->attrs.ints[2], in_shape.size());
      int64_t inner = 1;
      for (size_t d = axis + 1; d < in_shape.size(); ++d) inner *= in_shape[d];
      outputs[k] = Rows{src.data + op.rhs->attrs.ints[0] * inner, src.stride};
      continue;
    }
    if (op.fused && outputs[k].data) continue;  // computed with the matmul before it
    in.clear();
    for (const Operand& o : op.operands) {
      if (o.local) {
        const SegmentOp& src = s.ops[o.index];
        in.push_back(BatchOperand{outputs[o.index].data, outputs[o.index].stride, &src.shape, nullptr});
      } else {
        in.push_back(externals[o.index]);
      }
    }
    if (op.rhs->op == OpId::MatMul && in[1].stride < 0) {
      float* out = (op.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
      matmul_grouped(st.scratch, B, in[0], slot_rows[op.operands[1].index], op.shape, out, stats);
      outputs[k] = Rows{out, op.size};
      continue;
    }
    if (op.bias_slot >= 0 && externals[op.bias_slot].stride == 0 && in[1].stride == 0) {
      // out = bias broadcast to every row, then += a @ w; the add that follows is done.
      const SegmentOp& add = s.ops[k + 1];
      float* out = (add.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
      int64_t n = op.shape[1], rows_total = B * op.shape[0];
      for (int64_t r = 0; r < rows_total; ++r)
        std::memcpy(out + r * n, externals[op.bias_slot].data, n * sizeof(float));
      batched_matmul(B, in[0], in[1], op.shape, out, true);
      outputs[k] = Rows{out, op.size};
      outputs[k + 1] = Rows{out, op.size};
      stats.kernel_calls++;
      continue;
    }
    float* out = (op.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
    batched_kernel(op.rhs->op)(op.rhs->attrs, B, in, op.shape, out);
    outputs[k] = Rows{out, op.size};
    stats.kernel_calls++;
  }
  stats.batches++;
  auto& counts = stats.blocks[s.name];
  counts.nodes += B;
  counts.batches++;
  stats.peak_bytes = std::max<int64_t>(
      stats.peak_bytes, static_cast<int64_t>(st.arena.peak_bytes() + st.scratch.peak_bytes()));
}

// Depth of each pending node from a pass over the graph (DyNet's depth computation): nodes are
// recorded after the nodes they read, so one pass in recording order suffices.
std::vector<int> traversal_depths(const BatchedEngine::State& st) {
  std::vector<int> depth(st.nodes.size() - st.first_pending, 0);
  for (size_t i = st.first_pending; i < st.nodes.size(); ++i) {
    const Node& n = st.nodes[i];
    size_t count = st.segments[n.segment]->external_shapes.size();
    int d = 0;
    for (size_t e = 0; e < count; ++e) {
      const Value& v = st.externals[n.external_begin + e];
      if (v.kind == Value::Kind::Lazy && static_cast<size_t>(v.i) >= st.first_pending)
        d = std::max(d, depth[v.i - st.first_pending]);
    }
    depth[i - st.first_pending] = d + 1;
  }
  return depth;
}

void run_buckets(BatchedEngine::State& st, const std::vector<std::vector<std::vector<int>>>& buckets,
                 RunStats& stats) {
  for (const auto& row : buckets)
    for (size_t s = 0; s < row.size(); ++s)
      if (!row[s].empty()) run_batch(st, static_cast<int>(s), row[s], stats);
}

void run_agenda(BatchedEngine::State& st, RunStats& stats, double& schedule_seconds) {
  auto t0 = Clock::now();
  size_t first = st.first_pending, count = st.nodes.size() - first;
  std::vector<int> depth = traversal_depths(st);
  std::vector<int> waiting(count, 0);
  std::vector<std::vector<int>> dependents(count);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = st.nodes[first + i];
    size_t slots = st.segments[n.segment]->external_shapes.size();
    for (size_t e = 0; e < slots; ++e) {
      const Value& v = st.externals[n.external_begin + e];
      if (v.kind == Value::Kind::Lazy && static_cast<size_t>(v.i) >= first) {
        dependents[v.i - first].push_back(static_cast<int>(i));
        waiting[i]++;
      }
    }
  }
  std::vector<std::vector<int>> ready(st.segments.size());
  for (size_t i = 0; i < count; ++i)
    if (waiting[i] == 0) ready[st.nodes[first + i].segment].push_back(static_cast<int>(first + i));
  schedule_seconds += seconds_since(t0);
  for (;;) {
    auto t1 = Clock::now();
    int best = -1;
    double best_depth = 0;
    for (size_t s = 0; s < ready.size(); ++s) {
      if (ready[s].empty()) continue;
      double sum = 0;
      for (int id : ready[s]) sum += depth[id - first];
      double avg = sum / static_cast<double>(ready[s].size());
      if (best < 0 || avg < best_depth) {
        best = static_cast<int>(s);
        best_depth = avg;
      }
    }
    if (best < 0) break;
    std::vector<int> batch;
    batch.swap(ready[best]);
    schedule_seconds += seconds_since(t1);
    run_batch(st, best, batch, stats);
    auto t2 = Clock::now();
    for (int id : batch)
      for (int dep : dependents[id - first])
        if (--waiting[dep] == 0) ready[st.nodes[first + dep].segment].push_back(static_cast<int>(first + dep));
    schedule_seconds += seconds_since(t2);
  }
}

// Replaces every lazy handle inside `v` by a tensor of its own (outputs outlive the arena).
Value materialize(const BatchedEngine::State& st, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Lazy: {
      const auto& shape = st.segments[st.nodes[v.i].segment]->ops[v.slot].shape;
      Tensor t = Tensor::allocate(shape);
      std::memcpy(t.data.get(), st.output_of(v), t.size() * sizeof(float));
      return Value::of_tensor(std::move(t));
    }
    case Value::Kind::Tuple:
    case Value::Kind::Adt:
    case Value::Kind::Closure: {
      std::vector<Value> fields;
      fields.reserve(v.agg->fields.size());
      for (const auto& f : v.agg->fields) fields.push_back(materialize(st, f));
      Value out = v;
      auto agg = std::make_shared<Aggregate>(*v.agg);
      agg->fields = std::move(fields);
      out.agg = std::move(agg);
      return out;
    }
    default: return v;
  }
}

}  // namespace

BatchedEngine::BatchedEngine(std::shared_ptr<const ir::Module> module,
                             std::shared_ptr<const ParamStore> params, Scheduler scheduler)
    : module_(std::move(module)),
      params_(std::move(params)),
      scheduler_(scheduler),
      state_(std::make_unique<State>()) {}

BatchedEngine::~BatchedEngine() = default;

RunResult BatchedEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                             size_t first_instance) {
  int func = entry_function(*module_, entry);
  State& st = *state_;
  st.reset_run();
  RunResult result;
  RunStats& stats = result.stats;
  auto start = Clock::now();
  double flush_seconds = 0;

  // Runs every pending node, in the order the scheduler chooses.
  std::function<void()> flush = [&] {
    auto t0 = Clock::now();
    double schedule = 0;
    if (scheduler_ == Scheduler::InlineDepth) {
      run_buckets(st, st.buckets, stats);
      st.buckets.clear();
    } else if (scheduler_ == Scheduler::Depth) {
      auto t1 = Clock::now();
      std::vector<int> depth = traversal_depths(st);
      std::vector<std::vector<std::vector<int>>> buckets;
      for (size_t i = st.first_pending; i < st.nodes.size(); ++i) {
        int d = depth[i - st.first_pending];
        int s = st.nodes[i].segment;
        if (buckets.size() <= static_cast<size_t>(d)) buckets.resize(d + 1);
        if (buckets[d].size() <= static_cast<size_t>(s)) buckets[d].resize(s + 1);
        buckets[d][s].push_back(static_cast<int>(i));
      }
      schedule += seconds_since(t1);
      run_buckets(st, buckets, stats);
    } else {
      run_agenda(st, stats, schedule);
    }
    st.first_pending = st.nodes.size();
    double total = seconds_since(t0);
    stats.schedule_seconds += schedule;
    stats.kernel_seconds += total - schedule;
    flush_seconds += total;
  };

  std::vector<Value> outputs;
  outputs.reserve(inputs.size());
  if (!worker_) worker_ = std::make_unique<StackThread>();
  worker_->run([&] {
    RecordingInterpreter interp(*module_, *params_, stats, st, scheduler_, flush);
    for (size_t i = 0; i < inputs.size(); ++i) {
      try {
        outputs.push_back(interp.call(func, {inputs[i]}, module_->functions[func].span));
      } catch (const UserError& e) {
        throw for_instance(e, first_instance + i);
      }
    }
  });
  stats.host_seconds = seconds_since(start) - flush_seconds;
  flush();
  result.outputs.reserve(outputs.size());
  for (const auto& v : outputs) result.outputs.push_back(materialize(st, v));
  stats.instances = static_cast<int64_t>(inputs.size());
  stats.nodes = static_cast<int64_t>(st.nodes.size());
  stats.wall_seconds = seconds_since(start);
  return result;
}

}  // namespace acrobat
