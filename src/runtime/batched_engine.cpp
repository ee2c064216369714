#include "runtime/batched_engine.h"

#include <cstring>
#include <map>

#include "runtime/instance_driver.h"
#include "runtime/interpreted_blocks.h"
#include "runtime/reference_kernels.h"
#include "runtime/interpreter.h"

namespace acrobat {

namespace {

using analysis::StaticBlock;

class RecordingInterpreter;

}  // namespace

struct BatchedEngine::State : GraphEngine::Program {
  State(const ir::Module& m, const ParamStore& p, Graph& g, InstanceDriver& d)
      : module(m), params(p), graph(g), blocks(g.plan(), g.packed()), driver(d) {}
  void begin_run(int func, const std::vector<Value>& inputs, RunStats& stats) override;
  void run_instance(size_t i) override;
  Value output(size_t i) override;
  BlockExecutor& executor() override { return blocks; }

  const ir::Module& module;
  const ParamStore& params;
  Graph& graph;
  InterpretedBlocks blocks;
  InstanceDriver& driver;
  std::map<int, Value> constants;  // by IR site; evaluated once per engine
  std::vector<std::unique_ptr<RecordingInterpreter>> interpreters;  // one per instance
  std::vector<aot::Val> args;  // scratch for recording
  int func = -1;                       // of the run
  const std::vector<Value>* inputs = nullptr;
  std::vector<Value> outputs;
};

namespace {

// Applies `f` to the graph reference of every tensor `v` holds directly or in tuples (tuples are
// copied, not changed), as the generated code does: ghost levels and phase ends mark the values a
// branch or a call returns, not the tensors stored in data types or closures, which may have been
// made long before (an element deep in a parser's stack) and are shared.
template <class F>
void for_each_lazy(Value& v, F&& f) {
  switch (v.kind) {
    case Value::Kind::Lazy: f(v.ref); return;
    case Value::Kind::Tuple: {
      auto agg = std::make_shared<Aggregate>(*v.agg);
      for (auto& field : agg->fields) for_each_lazy(field, f);
      v.agg = std::move(agg);
      return;
    }
    default: return;
  }
}

// Runs one instance's host program, recording its tensor work into the graph.
class RecordingInterpreter : public Interpreter {
 public:
  RecordingInterpreter(const ir::Module& m, const ParamStore& p, RunStats& stats,
                       BatchedEngine::State& state)
      : Interpreter(m, p, stats), st_(state), plan_(*m.plan) {}

 protected:
  size_t tensor_ops(const ir::Block& block, size_t index, std::vector<Value>& frame) override {
    const StaticBlock* found = plan_.block_at(*block.bindings[index].rhs);
    ACROBAT_ASSERT(found, "a tensor operator outside every block");
    const StaticBlock& s = *found;
    const int32_t node = *st_.graph.num_nodes();
    int32_t k = 0;
    for (size_t j = s.begin; j < s.end; ++j) {
      const ir::Binding& b = block.bindings[j];
      const ir::Rhs& r = *b.rhs;
      if (!analysis::is_batched_op(r)) {
        frame[b.var] = analysis::is_tensor_op(r) ? constant(r) : host_binding(r, frame, 0);
        continue;
      }
      frame[b.var] = Value::lazy(node, k++);
    }
    if (s.ops.empty()) return s.end - s.begin;
    std::vector<aot::Val>& args = st_.args;
    args.clear();
    for (const analysis::BlockArg& a : s.args) {
      const Value& v = frame[a.var];
      if (v.kind == Value::Kind::Lazy) {
        args.push_back(v.ref);
      } else {
        aot::Val t{};
        t.node = -1;
        t.data = v.tensor->data.get();
        args.push_back(t);
      }
    }
    int32_t id = st_.graph.record(s.id, args.data());
    ACROBAT_ASSERT(id == node, "the graph numbered a node differently");
    return s.end - s.begin;
  }

  const Tensor& tensor_contents(const Value& v) override {
    if (v.kind != Value::Kind::Lazy) return *v.tensor;
    st_.driver.wait_for(st_.graph, v.ref.node);
    read_.shape = st_.graph.shape(v.ref);
    read_.data = std::shared_ptr<float[]>(std::shared_ptr<float[]>(),
                                          const_cast<float*>(st_.graph.data(v.ref)));
    return read_;
  }

  void after_call(const ir::Rhs& call, Value& result) override {
    if (!plan_.depth.ends_phase(call)) return;
    for_each_lazy(result, [](aot::Val& v) { aot::end_phase(v); });
  }

  void concurrently(size_t n, FunctionRef<void(size_t)> body) override {
    st_.driver.concurrently(n, body);
  }

  void after_branch(const ir::Rhs& r, size_t branch, Value& result) override {
    if (plan_.depth.ghosts.empty()) return;
    int pad = plan_.depth.ghost(r, branch);
    if (pad == 0) return;
    for_each_lazy(result, [pad](aot::Val& v) { aot::add_ghost_levels(v, pad); });
  }

 private:
  Value constant(const ir::Rhs& r) {
    auto it = st_.constants.find(r.site);
    if (it != st_.constants.end()) return it->second;
    return st_.constants[r.site] = Value::of_tensor(constant_value(r));
  }

  BatchedEngine::State& st_;
  const analysis::Plan& plan_;
  Tensor read_;
};

// Replaces every lazy reference inside `v` by a tensor of its own (outputs outlive the arena).
Value materialize(const Graph& graph, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Lazy: {
      Tensor t = Tensor::allocate(graph.shape(v.ref));
      std::memcpy(t.data.get(), graph.data(v.ref), t.size() * sizeof(float));
      return Value::of_tensor(std::move(t));
    }
    case Value::Kind::Tuple:
    case Value::Kind::Adt:
    case Value::Kind::Closure: {
      std::vector<Value> fields;
      fields.reserve(v.agg->fields.size());
      for (const auto& f : v.agg->fields) fields.push_back(materialize(graph, f));
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
    : GraphEngine(std::move(module), std::move(params), scheduler, threads, fibers),
      state_(std::make_unique<State>(*module_, *params_, graph(), driver())) {
  set_program(*state_);
}

BatchedEngine::~BatchedEngine() = default;

void BatchedEngine::State::begin_run(int f, const std::vector<Value>& in, RunStats& stats) {
  func = f;
  inputs = &in;
  outputs.assign(in.size(), Value{});
  // One interpreter (frames) per instance: with fibers, instances interleave.
  while (interpreters.size() < in.size())
    interpreters.push_back(std::make_unique<RecordingInterpreter>(module, params, stats, *this));
  for (auto& interp : interpreters) interp->set_stats(stats);
}

void BatchedEngine::State::run_instance(size_t i) {
  outputs[i] = interpreters[i]->call(func, {(*inputs)[i]}, module.functions[func].span);
}

Value BatchedEngine::State::output(size_t i) { return materialize(graph, outputs[i]); }

}  // namespace acrobat
