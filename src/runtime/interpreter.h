// The host-program interpreter shared by the engines: it walks the IR of one instance (calls,
// matches, ifs, closures, host arithmetic) and hands tensor work to the engine through two hooks,
// so the reference engine can execute operators eagerly while the batched engine records them.
#pragma once

#include <unordered_map>
#include <vector>

#include "analysis/concurrency.h"
#include "ir/ir.h"
#include "runtime/engine.h"
#include "support/function_ref.h"

namespace acrobat {

class Interpreter {
 public:
  Interpreter(const ir::Module& module, const ParamStore& params, RunStats& stats);
  virtual ~Interpreter() = default;

  // Calls function `func` with `args`; `site` is where the call is made (for error positions).
  Value call(int func, std::vector<Value> args, const Span& site) {
    return call(func, std::move(args), site, 0);
  }
  // Where the counters of the following calls go (an engine keeps its interpreters across runs).
  void set_stats(RunStats& stats) { stats_ = &stats; }

  // Nested calls allowed before an instance fails with "recursion too deep". The interpreter
  // recurses on the machine stack; engines run it on a kInterpreterStackBytes stack (big_stack.h),
  // where this depth fits with a wide margin. Under AddressSanitizer a level takes ~11 KiB, and
  // ASan cannot unwind an exception through more than 64 MiB of stack: the bound keeps below that.
  static constexpr int kMaxCallDepth = 5000;

 protected:
  // Executes (or records) the tensor operator bound at `block.bindings[index]`, and possibly the
  // bindings after it; stores their values in `frame` and returns how many bindings it consumed.
  virtual size_t tensor_ops(const ir::Block& block, size_t index, std::vector<Value>& frame) = 0;
  // Gives a tensor-to-host read its operand's contents (a batched engine runs pending work first).
  virtual const Tensor& tensor_contents(const Value& v) = 0;
  // Called when a call has returned `result`, and when branch `branch` (If: 0 then, 1 else; Match:
  // the clause) of an if or match has produced `result`: the batched engine's depth and phase
  // bookkeeping.
  virtual void after_call(const ir::Rhs& call, Value& result) {}
  virtual void after_branch(const ir::Rhs& r, size_t branch, Value& result) {}
  // Runs body(k) for k in [0, n): the members of a group of independent calls
  // (analysis/concurrency.h). Here one after the other; a batched engine runs them concurrently.
  virtual void concurrently(size_t n, FunctionRef<void(size_t)> body) {
    for (size_t k = 0; k < n; ++k) body(k);
  }

  // Evaluates one binding's right-hand side on the host (everything but tensor operators); `depth`
  // is the number of calls the evaluation is nested in (static blocks hold no calls: 0 there).
  Value host_binding(const ir::Rhs& r, std::vector<Value>& frame, int depth);
  static Value atom(const ir::Atom& a, const std::vector<Value>& frame);
  // Runs a tensor operator eagerly with the reference kernels (also used for constants).
  Value run_op(const ir::Rhs& r, const std::vector<Value>& frame);

  const ir::Module& m_;
  const ParamStore& params_;
  RunStats* stats_;

 private:
  // The call depth is passed down, not kept in the interpreter: concurrent calls of one instance
  // interleave, each at its own depth.
  Value call(int func, std::vector<Value> args, const Span& site, int depth);
  Value block(const ir::Block& b, std::vector<Value>& frame, int depth);
  std::vector<Value> atoms(const std::vector<ir::Atom>& as, const std::vector<Value>& frame);
  bool match(const ir::Pattern& p, const Value& v, std::vector<Value>& frame);
  Value host_op(const ir::Rhs& r, const std::vector<Value>& frame);
  Value int_op(const ir::Rhs& r, int64_t x, int64_t y);
  Value host_read(const ir::Rhs& r, const std::vector<Value>& frame);

  std::vector<std::vector<Value>> frame_pool_;
  const analysis::ConcurrencyPlan* concurrency_ = nullptr;  // null when there are no groups
};

// Marks a UserError as belonging to instance `i` ("instance 7: ...").
UserError for_instance(const UserError& e, size_t i);

}  // namespace acrobat
