#include "engines/reference_engine.h"

#include <chrono>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "support/big_stack.h"
#include "support/fault.h"
#include "autodiff/adjoints.h"
#include "engines/interpreter.h"
#include "support/clock.h"

namespace acrobat {

namespace {

class EagerInterpreter : public Interpreter {
 public:
  using Interpreter::Interpreter;

 protected:
  size_t tensor_ops(const ir::Block& block, size_t index, std::vector<Value>& frame) override {
    const ir::Binding& b = block.bindings[index];
    frame[b.var] = run_op(*b.rhs, frame);
    return 1;
  }
  const Tensor& tensor_contents(const Value& v) override { return *v.tensor; }
};

// The eager interpreter that also records what it did for the backward pass of one instance.
class TapeInterpreter : public EagerInterpreter {
 public:
  using EagerInterpreter::EagerInterpreter;

  // Adds d(loss)/d(param) of the instance just run to `grads`, and d(loss)/d(tensor) to the gradients
  // of its input_leaves, and forgets the instance.
  void backward(const Value& loss, std::vector<Tensor>& grads) {
    std::unordered_map<const Tensor*, std::vector<float>> adj;
    adj[loss.tensor.get()] = {1.0f};
    // The adjoint of a value that is an operator's output or a param read, created at zero.
    auto wanted = [&](const std::shared_ptr<const Tensor>& t) -> float* {
      if (!produced_.count(t.get()) && !leaf_index_.count(t.get())) return nullptr;
      std::vector<float>& a = adj[t.get()];
      if (a.empty()) a.assign(static_cast<size_t>(t->size()), 0.0f);
      return a.data();
    };
    std::vector<TensorArg<float>> in;
    std::vector<float*> din;
    // Reverse order is reverse topological: an output's adjoint is complete when its entry comes.
    for (auto e = tape_.rbegin(); e != tape_.rend(); ++e) {
      auto it = adj.find(e->out.get());
      if (it == adj.end()) continue;
      const std::vector<float> dy = std::move(it->second);
      adj.erase(it);
      in.clear();
      din.clear();
      for (const auto& t : e->in) {
        in.push_back({t->shape, t->data.get()});
        din.push_back(wanted(t));
      }
      adjoint<float>(e->op, e->attrs, in, e->out->shape, e->out->data.get(), dy.data(), din);
    }
    for (const auto& [t, leaf] : leaves_) {
      auto it = adj.find(t.get());
      if (it == adj.end()) continue;
      const std::vector<float>& g = it->second;
      float* dst = leaf.param >= 0 ? grads[leaf.param].data.get() : leaf.input_grad;
      if (leaf.rows.empty()) {
        for (size_t j = 0; j < g.size(); ++j) dst[j] += g[j];
        continue;
      }
      const size_t row = g.size() / leaf.rows.size();
      for (size_t k = 0; k < leaf.rows.size(); ++k)
        for (size_t j = 0; j < row; ++j) dst[static_cast<size_t>(leaf.rows[k]) * row + j] += g[k * row + j];
    }
    tape_.clear();
    produced_.clear();
    leaves_.clear();
    leaf_index_.clear();
  }

  // The tensors of the instance about to run as leaves whose gradients go to `grads` (before the
  // call; backward forgets them). A tensor at several places of the instance is one leaf.
  void input_leaves(const Value& instance, const InputGradients& grads) {
    for (const auto& t : instance_tensors(instance))
      if (t->size() > 0 && leaf_index_.emplace(t.get(), leaves_.size()).second)
        leaves_.push_back({t, Leaf{-1, {}, grads.gradient_of(*t)}});
  }

 protected:
  size_t tensor_ops(const ir::Block& block, size_t index, std::vector<Value>& frame) override {
    const size_t ran = EagerInterpreter::tensor_ops(block, index, frame);
    const ir::Binding& b = block.bindings[index];
    const ir::Rhs& r = *b.rhs;
    if (differentiable(r.op)) {
      Entry e{r.op, instance_attrs(r, frame), {}, frame[b.var].tensor};
      for (const ir::Atom& a : r.args) e.in.push_back(frame[a.var].tensor);
      produced_.insert(e.out.get());
      tape_.push_back(std::move(e));
    }
    return ran;
  }
  void param_read(int param, const Value& v, std::span<const int64_t> rows) override {
    // A whole param is one tensor however often it is read: one leaf.
    if (!leaf_index_.emplace(v.tensor.get(), leaves_.size()).second) return;
    leaves_.push_back({v.tensor, Leaf{param, std::vector<int64_t>(rows.begin(), rows.end()), nullptr}});
  }

 private:
  struct Entry {
    OpId op;
    OpAttrs attrs;
    std::vector<std::shared_ptr<const Tensor>> in;
    std::shared_ptr<const Tensor> out;
  };
  struct Leaf {
    int param;                  // -1: an input tensor
    std::vector<int64_t> rows;  // empty: the whole param
    float* input_grad;          // an input tensor's gradient (InputGradients)
  };
  std::vector<Entry> tape_;
  std::unordered_set<const Tensor*> produced_;
  std::vector<std::pair<std::shared_ptr<const Tensor>, Leaf>> leaves_;  // in the order of the reads
  std::unordered_map<const Tensor*, size_t> leaf_index_;
};

// Runs function `func` on each input, one after the other, with an interpreter of type Interp on
// `worker`'s stack; `before(interp, input)` precedes each instance and `after(interp, output)`
// follows it.
template <class Interp, class Before, class After>
void run_instances(StackThread& worker, const ir::Module& module, const ParamStore& params, int func,
                   const std::vector<Value>& inputs, size_t first_instance, int64_t max_steps, RunStats& stats,
                   std::vector<Value>& outputs, Before&& before, After&& after) {
  outputs.reserve(inputs.size());
  const auto start = Clock::now();
  const bool faults = faults_injected();
  worker.run([&] {
    Interp interp(module, params, stats);
    for (size_t i = 0; i < inputs.size(); ++i) {
      try {
        if (faults) ACROBAT_FAULT_POINT("instance");
        before(interp, inputs[i]);
        interp.start_instance(max_steps);
        // An entry that makes sizes runs the function returning them beside its result, as the
        // batched engines do (HostRuntime::begin_run): the same calls, for the step budget.
        const int made_by = module.functions[func].made_by;
        Value out = interp.call(made_by >= 0 ? made_by : func, entry_arguments(module, func, inputs[i]),
                                module.functions[func].span);
        outputs.push_back(made_by >= 0 ? out.agg->fields[0] : std::move(out));
      } catch (const UserError& e) {
        throw for_instance(e, first_instance + i);
      }
      after(interp, outputs.back());
    }
  });
  stats.instances = static_cast<int64_t>(inputs.size());
  stats.wall_seconds = seconds_since(start);
}

}  // namespace

ReferenceEngine::ReferenceEngine(std::shared_ptr<const ir::Module> module,
                                 std::shared_ptr<const ParamStore> params)
    : module_(std::move(module)), params_(std::move(params)) {}

RunResult ReferenceEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                             size_t first_instance) {
  const int func = entry_function(*module_, entry);
  RunResult result;
  if (!worker_) worker_ = std::make_unique<StackThread>();
  run_instances<EagerInterpreter>(*worker_, *module_, *params_, func, inputs, first_instance, max_steps_, result.stats,
                                  result.outputs, [](EagerInterpreter&, const Value&) {},
                                  [](EagerInterpreter&, const Value&) {});
  return result;
}

GradResult ReferenceEngine::gradients(const std::vector<Value>& inputs, const std::string& entry,
                                      size_t first_instance, std::vector<Tensor> zeroed, GradWrt wrt) {
  const int func = loss_function(*module_, entry);
  GradResult result;
  std::optional<InputGradients> input_grads;
  if (wrt == GradWrt::ParamsAndInputs) input_grads.emplace(*module_, *params_, inputs);
  result.grads = zero_grads(*params_, std::move(zeroed));
  if (!worker_) worker_ = std::make_unique<StackThread>();
  run_instances<TapeInterpreter>(
      *worker_, *module_, *params_, func, inputs, first_instance, max_steps_, result.stats, result.outputs,
      [&](TapeInterpreter& interp, const Value& input) {
        if (input_grads) interp.input_leaves(input, *input_grads);
      },
      [&](TapeInterpreter& interp, const Value& loss) { interp.backward(loss, result.grads); });
  if (input_grads) result.input_grads = input_grads->take();
  return result;
}

}  // namespace acrobat
