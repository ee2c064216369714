#include "runtime/batched_engine.h"

#include "analysis/plan.h"

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
#include "runtime/fibers.h"
#include "runtime/interpreter.h"
#include "runtime/schedule.h"
#include "runtime/thread_pool.h"

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

using analysis::ArgMode;
using analysis::BlockArg;
using analysis::BlockOp;
using analysis::StaticBlock;
using analysis::is_batched_op;
using analysis::is_tensor_op;

// Where a batch left an operator's outputs: instance r at data + r * stride.
struct Rows {
  float* data = nullptr;
  int64_t stride = 0;
};

struct Node {
  int block;
  int phase = 0;
  int depth = 0;          // within its phase
  size_t external_begin;  // into State::externals: one value per block argument
  int batch = -1;         // executed batch, -1 while pending
  int row = 0;            // the node's row within its batch
};

struct Batch {
  int block;
  std::vector<Rows> outputs;  // per block operator; valid for escaping ones
};

}  // namespace

struct BatchedEngine::State {
  const analysis::Plan* plan = nullptr;
  std::unique_ptr<ThreadPool> pool;  // null: one thread
  std::unique_ptr<InstanceFibers> fibers;  // programs that read tensors
  std::map<const ir::Rhs*, Value> constants;
  Arena arena;    // outputs that outlive their batch: one run
  Arena scratch;  // gathered panels and outputs used only inside their batch
  // One run:
  std::vector<Node> nodes;
  std::vector<Value> externals;
  std::vector<Batch> batches;
  size_t first_pending = 0;
  Buckets buckets;            // inline depth
  std::vector<int> demanded;  // nodes whose values waiting tensor reads need
  std::vector<uint32_t> marks;
  uint32_t stamp = 0;

  void reset_run() {
    nodes.clear();
    externals.clear();
    batches.clear();
    buckets.clear();
    demanded.clear();
    first_pending = 0;
    arena.reset();
    arena.reset_peak();
    scratch.reset();
    scratch.reset_peak();
  }

  const StaticBlock& block_of(const Node& n) const { return plan->blocks[n.block]; }
  const std::vector<int64_t>& shape_of(const Value& v) const {
    return block_of(nodes[v.i]).ops[v.slot].shape;
  }
  float* output_of(const Value& v) const {
    const Node& n = nodes[v.i];
    const Rows& rows = batches[n.batch].outputs[v.slot];
    return rows.data + n.row * rows.stride;
  }
};

namespace {

// Applies `f` to every tensor handle `v` holds directly or in tuples (tuples are copied, not
// changed), as the generated code does: ghost levels and phase ends mark the values a branch or a
// call returns, not the tensors stored in data types or closures, which may have been made long
// before (an element deep in a parser's stack) and are shared.
template <class F>
void for_each_lazy(Value& v, F&& f) {
  switch (v.kind) {
    case Value::Kind::Lazy: f(v); return;
    case Value::Kind::Tuple: {
      auto agg = std::make_shared<Aggregate>(*v.agg);
      for (auto& field : agg->fields) for_each_lazy(field, f);
      v.agg = std::move(agg);
      return;
    }
    default: return;
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
    const analysis::Plan& plan = *st_.plan;
    auto found = plan.block_starting_at.find(block.bindings[index].rhs.get());
    ACROBAT_ASSERT(found != plan.block_starting_at.end(), "a tensor operator outside every block");
    const StaticBlock& s = plan.blocks[found->second];
    int node_id = static_cast<int>(st_.nodes.size());
    size_t k = 0;
    for (size_t j = s.begin; j < s.end; ++j) {
      const ir::Binding& b = block.bindings[j];
      const ir::Rhs& r = *b.rhs;
      if (!is_batched_op(r)) {
        frame[b.var] = is_tensor_op(r) ? constant(r, frame) : host_binding(r, frame);
        continue;
      }
      frame[b.var] = Value::lazy(node_id, static_cast<int32_t>(k));
      stats_.tensor_ops++;
      stats_.flops += r.flops;
      ++k;
    }
    if (s.ops.empty()) return s.end - s.begin;
    // Phase: the latest among the pending inputs'; depth: 1 + the deepest of them in that phase.
    Placement place;
    size_t external_begin = st_.externals.size();
    for (const BlockArg& a : s.args) {
      const Value& v = frame[a.var];
      st_.externals.push_back(v);
      if (v.kind != Value::Kind::Lazy) continue;
      ACROBAT_ASSERT(v.i != node_id, "a block reads its own output as an argument");
      const Node& in = st_.nodes[v.i];
      if (in.batch < 0)
        place.add_input(in.phase, in.depth, v.phase_ends, v.ghost);
      else
        place.add_computed_input(in.phase, v.phase_ends, v.ghost);
    }
    Node n{s.id, place.phase, place.node_depth(), external_begin};
    st_.nodes.push_back(n);
    if (scheduler_ == Scheduler::InlineDepth) add_to_bucket(st_.buckets, n.phase, n.depth, s.id, node_id);
    return s.end - s.begin;
  }

  const Tensor& tensor_contents(const Value& v) override {
    if (v.kind != Value::Kind::Lazy) return *v.tensor;
    if (st_.nodes[v.i].batch < 0) {
      // On a fiber: wait until every instance waits, then what they wait for runs. Otherwise run
      // it now.
      st_.demanded.push_back(static_cast<int>(v.i));
      if (st_.fibers && st_.fibers->inside())
        st_.fibers->wait();
      else
        flush_();
      ACROBAT_ASSERT(st_.nodes[v.i].batch >= 0, "a tensor read resumed before its node ran");
    }
    read_.shape = st_.shape_of(v);
    read_.data = std::shared_ptr<float[]>(std::shared_ptr<float[]>(), st_.output_of(v));
    return read_;
  }

  void after_call(const ir::Rhs& call, Value& result) override {
    const auto& ends = st_.plan->depth.phase_ends;
    if (ends.empty() || !ends.count(&call)) return;
    for_each_lazy(result, [](Value& v) {
      v.phase_ends++;
      v.ghost = 0;
    });
  }

  void after_branch(const ir::Rhs& r, size_t branch, Value& result) override {
    const auto& ghosts = st_.plan->depth.ghosts;
    if (ghosts.empty()) return;
    auto it = ghosts.find(&r);
    if (it == ghosts.end() || it->second[branch] == 0) return;
    int pad = it->second[branch];
    for_each_lazy(result, [pad](Value& v) { v.ghost = static_cast<int16_t>(v.ghost + pad); });
  }

 private:
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

// A kernel call on instances [0, B) split into contiguous parts across the engine's threads, when
// it has enough work (B * flops per instance) to pay for waking them.
constexpr double kMinParallelFlops = 4e6;
void split(BatchedEngine::State& st, int64_t B, int64_t flops,
           const std::function<void(int64_t, int64_t)>& fn) {
  int tasks = 1;
  if (st.pool && B >= 2 && double(B) * double(flops) >= kMinParallelFlops)
    tasks = static_cast<int>(std::min<int64_t>(st.pool->size(), B));
  if (tasks == 1) return fn(0, B);
  st.pool->run(tasks, [&](int t) { fn(B * t / tasks, B * (t + 1) / tasks); });
}

// The operand of instances [b0, ...).
BatchOperand slice(BatchOperand x, int64_t b0) {
  if (x.rows) x.rows += b0;
  else if (x.data) x.data += b0 * x.stride;
  return x;
}

// Executes one batch: the nodes (all of one block, all ready) as one kernel call per operator.
void run_batch(BatchedEngine::State& st, int block, const std::vector<int>& batch_ids,
               RunStats& stats) {
  const StaticBlock& s = st.plan->blocks[block];
  // Instances picking the same matrix of an indexed param next to each other (see
  // batched_matmul_grouped).
  const std::vector<int> sorted_ids = ordered_by_indexed_weights(s, batch_ids, [&](int id, int e) {
    const Value& v = st.externals[st.nodes[id].external_begin + e];
    return v.kind == Value::Kind::Lazy ? st.output_of(v) : v.tensor->data.get();
  });
  const std::vector<int>& node_ids = sorted_ids.empty() ? batch_ids : sorted_ids;
  int64_t B = static_cast<int64_t>(node_ids.size());
  int batch_id = static_cast<int>(st.batches.size());
  for (size_t r = 0; r < node_ids.size(); ++r) {
    st.nodes[node_ids[r]].batch = batch_id;
    st.nodes[node_ids[r]].row = static_cast<int>(r);
  }
  st.batches.push_back(Batch{block, std::vector<Rows>(s.ops.size())});
  st.scratch.reset();

  // Arguments: reuse ones are one tensor by construction; the others are found shared, strided in
  // place, or scattered (then gathered into a panel, or read where they lie).
  std::vector<BatchOperand> externals(s.args.size());
  std::vector<std::vector<const float*>> slot_rows(externals.size());
  std::vector<std::vector<const kernels::PackedWeights*>> slot_packed(externals.size());
  for (size_t e = 0; e < externals.size(); ++e) {
    const BlockArg& arg = s.args[e];
    BatchOperand& op = externals[e];
    op.shape = &arg.shape;
    if (arg.known && arg.mode == ArgMode::Reuse) {
      const Value& v = st.externals[st.nodes[node_ids[0]].external_begin + e];
      op.data = v.tensor->data.get();
      op.stride = 0;
      op.packed = v.tensor->packed.get();
      continue;
    }
    std::vector<const float*>& rows = slot_rows[e];
    std::vector<const kernels::PackedWeights*>& packs = slot_packed[e];
    rows.resize(B);
    packs.assign(B, nullptr);
    int64_t n = num_elements(arg.shape);
    const kernels::PackedWeights* packed = nullptr;
    for (int64_t b = 0; b < B; ++b) {
      const Value& v = st.externals[st.nodes[node_ids[b]].external_begin + e];
      if (v.kind == Value::Kind::Lazy) {
        rows[b] = st.output_of(v);
      } else {
        rows[b] = v.tensor->data.get();
        packed = packs[b] = v.tensor->packed.get();
      }
    }
    bool shared = true, strided = true;
    for (int64_t b = 1; b < B; ++b) {
      shared = shared && rows[b] == rows[0];
      strided = strided && rows[b] == rows[0] + b * n;
    }
    if (shared) {
      op.data = rows[0];
      op.stride = 0;
      op.packed = packed;
    } else if (strided) {
      op.data = rows[0];
      op.stride = n;
    } else if (arg.weights_only) {
      op.data = nullptr;  // scattered weights: see matmul_grouped
      op.stride = -1;
    } else if (arg.concat_only) {
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
    const BlockOp& op = s.ops[k];
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
    for (const analysis::BlockOperand& o : op.operands) {
      if (o.local) {
        const BlockOp& src = s.ops[o.index];
        in.push_back(BatchOperand{outputs[o.index].data, outputs[o.index].stride, &src.shape, nullptr});
      } else {
        in.push_back(externals[o.index]);
      }
    }
    if (op.rhs->op == OpId::MatMul && in[1].stride < 0) {
      float* out = (op.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
      stats.kernel_calls += batched_matmul_grouped(B, in[0], slot_rows[op.operands[1].index].data(),
                                                   slot_packed[op.operands[1].index].data(), op.shape,
                                                   out, st.scratch);
      outputs[k] = Rows{out, op.size};
      continue;
    }
    if (op.bias_arg >= 0 && externals[op.bias_arg].stride == 0 && in[1].stride == 0) {
      // out = bias broadcast to every row, then += a @ w; the add that follows is done.
      const BlockOp& add = s.ops[k + 1];
      float* out = (add.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
      int64_t n = op.shape[1], rows = op.shape[0];
      const float* bias = externals[op.bias_arg].data;
      split(st, B, op.rhs->flops, [&](int64_t b0, int64_t b1) {
        for (int64_t r = b0 * rows; r < b1 * rows; ++r) std::memcpy(out + r * n, bias, n * sizeof(float));
        batched_matmul(b1 - b0, slice(in[0], b0), slice(in[1], b0), op.shape, out + b0 * op.size, true);
      });
      outputs[k] = Rows{out, op.size};
      outputs[k + 1] = Rows{out, op.size};
      stats.kernel_calls++;
      continue;
    }
    float* out = (op.escapes ? st.arena : st.scratch).alloc(static_cast<size_t>(B * op.size));
    BatchedKernel kernel = batched_kernel(op.rhs->op);
    split(st, B, op.rhs->flops, [&](int64_t b0, int64_t b1) {
      if (b0 == 0 && b1 == B) return kernel(op.rhs->attrs, B, in, op.shape, out);
      std::vector<BatchOperand> part(in.size());
      for (size_t i = 0; i < in.size(); ++i) part[i] = slice(in[i], b0);
      kernel(op.rhs->attrs, b1 - b0, part, op.shape, out + b0 * op.size);
    });
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
    size_t count = st.plan->blocks[n.block].args.size();
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
    size_t slots = st.plan->blocks[n.block].args.size();
    for (size_t e = 0; e < slots; ++e) {
      const Value& v = st.externals[n.external_begin + e];
      if (v.kind == Value::Kind::Lazy && static_cast<size_t>(v.i) >= first) {
        dependents[v.i - first].push_back(static_cast<int>(i));
        waiting[i]++;
      }
    }
  }
  std::vector<std::vector<int>> ready(st.plan->blocks.size());
  for (size_t i = 0; i < count; ++i)
    if (waiting[i] == 0) ready[st.nodes[first + i].block].push_back(static_cast<int>(first + i));
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
        if (--waiting[dep] == 0) ready[st.nodes[first + dep].block].push_back(static_cast<int>(first + dep));
    schedule_seconds += seconds_since(t2);
  }
}

// Replaces every lazy handle inside `v` by a tensor of its own (outputs outlive the arena).
Value materialize(const BatchedEngine::State& st, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Lazy: {
      const auto& shape = st.shape_of(v);
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
                             std::shared_ptr<const ParamStore> params, Scheduler scheduler,
                             int threads, bool fibers)
    : module_(std::move(module)),
      params_(std::move(params)),
      scheduler_(scheduler),
      fibers_(fibers),
      state_(std::make_unique<State>()) {
  ACROBAT_ASSERT(module_->plan, "the batched engine needs a module compiled by compile_model");
  state_->plan = module_->plan.get();
  if (threads > 1) state_->pool = std::make_unique<ThreadPool>(threads);
}

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
      auto run = [&](int block, const std::vector<int>& ids) { run_batch(st, block, ids, stats); };
      if (st.demanded.empty()) {
        run_all(st.buckets, run);
      } else {
        auto inputs = [&](int n, auto&& f) {
          const Node& node = st.nodes[n];
          size_t count = st.plan->blocks[node.block].args.size();
          for (size_t a = 0; a < count; ++a) {
            const Value& v = st.externals[node.external_begin + a];
            if (v.kind == Value::Kind::Lazy && st.nodes[v.i].batch < 0) f(static_cast<int>(v.i));
          }
        };
        run_demanded(st.buckets, st.demanded, st.nodes.size(), st.marks, st.stamp, inputs, run);
      }
      st.demanded.clear();
    } else if (scheduler_ == Scheduler::Depth) {
      auto t1 = Clock::now();
      std::vector<int> depth = traversal_depths(st);
      std::vector<std::vector<std::vector<int>>> buckets;
      for (size_t i = st.first_pending; i < st.nodes.size(); ++i) {
        int d = depth[i - st.first_pending];
        int s = st.nodes[i].block;
        if (buckets.size() <= static_cast<size_t>(d)) buckets.resize(d + 1);
        if (buckets[d].size() <= static_cast<size_t>(s)) buckets[d].resize(s + 1);
        buckets[d][s].push_back(static_cast<int>(i));
      }
      schedule += seconds_since(t1);
      run_buckets(st, buckets, stats);
    } else {
      run_agenda(st, stats, schedule);
    }
    st.demanded.clear();
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
    if (fibers_ && st.plan->tensor_reads && inputs.size() > 1) {
      // One fiber and one interpreter (call depth, frames) per instance.
      if (!st.fibers) st.fibers = std::make_unique<InstanceFibers>();
      std::vector<std::unique_ptr<RecordingInterpreter>> interps;
      for (size_t i = 0; i < inputs.size(); ++i)
        interps.push_back(
            std::make_unique<RecordingInterpreter>(*module_, *params_, stats, st, scheduler_, flush));
      outputs.resize(inputs.size());
      st.fibers->run(
          inputs.size(),
          [&](size_t i) {
            try {
              outputs[i] = interps[i]->call(func, {inputs[i]}, module_->functions[func].span);
            } catch (const UserError& e) {
              throw for_instance(e, first_instance + i);
            }
          },
          flush);
      return;
    }
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
