// The reference engine: runs the IR one instance at a time, executing every tensor operator eagerly
// with the CPU kernels. It is the correctness baseline the batched engines are compared against.
#pragma once

#include "support/big_stack.h"
#include "engines/engine.h"
#include "engines/interpreter.h"

namespace acrobat {

class ReferenceEngine : public Engine {
 public:
  ReferenceEngine(std::shared_ptr<const ir::Module> module, std::shared_ptr<const ParamStore> params);
  const char* name() const override { return "reference"; }
  RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                size_t first_instance = 0) override;
  // Reverse mode, one instance at a time: the forward run records every differentiable operator it
  // executes (a tape) and every param read, and the adjoints (autodiff/adjoints.h) run back along
  // the tape; param rows receive their gradients in the order they were read, and the instance's
  // tensors theirs when asked for. This is the unbatched gradient the batched engines' backward
  // passes are compared with.
  GradResult gradients(const std::vector<Value>& inputs, const std::string& entry = "loss",
                       size_t first_instance = 0, std::vector<Tensor> zeroed = {},
                       GradWrt wrt = GradWrt::Params) override;

  static constexpr int kMaxCallDepth = Interpreter::kMaxCallDepth;

 private:
  std::shared_ptr<const ir::Module> module_;
  std::shared_ptr<const ParamStore> params_;
  std::unique_ptr<StackThread> worker_;  // runs the interpreter (deep recursion needs its stack)
};

}  // namespace acrobat
