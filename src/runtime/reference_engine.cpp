#include "runtime/reference_engine.h"

#include <chrono>

#include "support/big_stack.h"
#include "runtime/interpreter.h"

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

}  // namespace

ReferenceEngine::ReferenceEngine(std::shared_ptr<const ir::Module> module,
                                 std::shared_ptr<const ParamStore> params)
    : module_(std::move(module)), params_(std::move(params)) {}

RunResult ReferenceEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                             size_t first_instance) {
  int func = entry_function(*module_, entry);
  RunResult result;
  result.outputs.reserve(inputs.size());
  auto start = std::chrono::steady_clock::now();
  if (!worker_) worker_ = std::make_unique<StackThread>();
  worker_->run([&] {
    EagerInterpreter interp(*module_, *params_, result.stats);
    for (size_t i = 0; i < inputs.size(); ++i) {
      try {
        result.outputs.push_back(
            interp.call(func, entry_arguments(*module_, func, inputs[i]), module_->functions[func].span));
      } catch (const UserError& e) {
        throw for_instance(e, first_instance + i);
      }
    }
  });
  result.stats.instances = static_cast<int64_t>(inputs.size());
  result.stats.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace acrobat
