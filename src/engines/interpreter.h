// The reference engine's host program: it walks the IR of one instance (calls, matches, ifs,
// closures, host arithmetic) over Values that own their tensors and hands tensor work to the engine
// through two hooks (the reference engine executes each operator eagerly). The batched engines run
// the host program over aot::Val instead (engines/host_interpreter.h, or generated code).
#pragma once

#include <span>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "engines/engine.h"

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
  // Before an instance: it may make `max_steps` calls, tail calls included (0: any number;
  // Engine::limit_steps).
  void start_instance(int64_t max_steps) {
    max_steps_ = max_steps;
    steps_ = 0;
  }

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
  // Evaluates one binding's right-hand side on the host (everything but tensor operators); `depth`
  // is the number of calls the evaluation is nested in (static blocks hold no calls: 0 there).
  Value host_binding(const ir::Rhs& r, std::vector<Value>& frame, int depth);
  static Value atom(const ir::Atom& a, const std::vector<Value>& frame);
  // Runs a tensor operator eagerly with the reference kernels (also used for constants).
  Value run_op(const ir::Rhs& r, const std::vector<Value>& frame);
  Value run_sized_op(const ir::Rhs& r, const std::vector<Value>& frame,
                     std::span<const Tensor* const> inputs);
  // An operator's attributes with its size variables bound to the instance's sizes.
  static OpAttrs instance_attrs(const ir::Rhs& r, const std::vector<Value>& frame);
  // An operator whose shapes have size variables: its shape rule run again on the instance's
  // shapes, which checks what only the instance can tell (a slice's bounds, a ranked argmax's
  // count), and its result type and attributes there. Throws the rule's message otherwise.
  struct InstanceShape {
    Type type;
    OpAttrs attrs;
    std::vector<std::vector<int64_t>> operands;  // the operands' shapes
  };
  InstanceShape instance_shape(const ir::Rhs& r, const std::vector<Value>& frame,
                               std::span<const Tensor* const> inputs) const;
  // Called with the value of every read of param `param`: the whole param (`rows` empty), one
  // tensor of an indexed param, or the rows a gather stacked, in order.
  virtual void param_read(int /*param*/, const Value& /*v*/, std::span<const int64_t> /*rows*/) {}
  // Called with the value of every emit(v) of the instance, in order (the reference engine does not
  // stream them).
  virtual void emitted(const Value& /*v*/) {}

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
  static void instance_sizes(const ir::Rhs& r, const std::vector<Value>& frame, std::vector<int64_t>& dims,
                             std::vector<int64_t>& values);

  std::vector<std::vector<Value>> frame_pool_;
  const std::vector<uint8_t>* tail_calls_ = nullptr;  // by site (analysis/tail_calls.h), if planned
  bool tail_pending_ = false;                          // a tail call's arguments wait in tail_args_
  std::vector<Value> tail_args_;
  int64_t max_steps_ = 0, steps_ = 0;                  // the instance's step budget and its calls
  void count_step(const Span& site, int func);
};

// The user errors of a gather (ir::RhsKind::ParamGather) of param `param`, on every engine: an
// index out of range (entry `entry` of the list), and an empty list.
std::string gather_index_message(const std::string& param, int64_t index, int64_t entry, int64_t count);
std::string gather_empty_message(const std::string& param);
// An instance that made more calls than its step budget allows (Engine::limit_steps), at a call
// of `function`.
std::string step_budget_message(int64_t max_steps, const std::string& function);

}  // namespace acrobat
