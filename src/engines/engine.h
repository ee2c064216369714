// The interface every engine implements: run a model's entry function on a batch of instances.
// The reference engine runs them one by one; batched engines must produce the same outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "autodiff/gradients.h"
#include "runtime/params.h"
#include "runtime/run_stats.h"
#include "runtime/value.h"
#include "support/diagnostics.h"
#include "support/function_ref.h"

namespace acrobat {

// An instance left out of a run (OnError::Skip): its index in the run's inputs and what failed.
struct InstanceFailure {
  size_t instance = 0;
  std::string message;  // the user error's, naming the instance by its number (run_batches)
};

struct RunResult {
  std::vector<Value> outputs;  // one per instance, in input order (an empty Value for one skipped)
  RunStats stats;
  std::vector<InstanceFailure> failures;  // the instances skipped, in order (OnError::Skip)
};

// What a run does with an instance that fails with a user error (an index out of range, an empty
// list gathered, ...): fail the whole run (Raise), or leave the instance out, report it and
// return the others' outputs (Skip). An internal error (a bug in acrobat) always fails the run.
enum class OnError { Raise, Skip };
// "raise" or "skip" (--on-error, Python's on_error=); a UserError otherwise.
OnError parse_on_error(const std::string& text);

// What a gradient run differentiates with respect to: the params alone, or also the tensors of the
// instances (GradResult::input_grads).
enum class GradWrt { Params, ParamsAndInputs };

// A gradient run: each instance's loss (the entry's output, one number) and, for every param of the
// module in its order, d(sum of the instances' losses)/d(param) with the param's full shape (an
// indexed param: all its tensors, [count, ...]), and where it wrote them (`written`, WrittenChunks).
// Decisions taken from tensor values (argmax, item) are those of the forward run and are not
// differentiated.
// With GradWrt::ParamsAndInputs, `input_grads[i][j]` is d(sum of the losses)/d(tensor j of instance
// i), the tensors counted as instance_tensors lists them, each of its tensor's shape. A gradient is
// that of the tensor's memory: a tensor at several places (the same instance twice, one tensor in two
// instances or twice in one) has at each of them the sum over all its uses.
struct GradResult {
  std::vector<Value> outputs;
  std::vector<Tensor> grads;
  RunStats stats;
  WrittenChunks written;
  std::vector<std::vector<Tensor>> input_grads;
};

// The instances of an open run (Engine::run_open): they come while it runs and each is answered as
// soon as its output is computed. Called on the run's thread, between flushes.
class InstanceFeed {
 public:
  virtual ~InstanceFeed() = default;
  struct Joining {
    size_t ticket = 0;  // the feed's name for the instance in the calls below
    Value input;
    size_t number = 0;  // the instance's number in error messages ("instance 3: ...")
    // Its caller streams its emits: until its first emit, the tensor reads it waits for are
    // computed ahead of the other instances' pending work (its time to first output is one
    // flush of its own work, not a round of everyone's).
    bool streams = false;
  };
  // Called between the rounds of a run that has instances running and between the batches of its
  // flushes: a feed that shares the run's thread with other work may let it run here, the run
  // waiting meanwhile (a server's other models, tools/engine_turns.h).
  virtual void may_yield() {}
  // Up to `room` instances to start now. With `idle` nothing is running: the call may block until
  // some come, and an empty answer then ends the run.
  virtual std::vector<Joining> take(bool idle, size_t room) = 0;
  // Whether instance `ticket` is to stop where it is (a deadline passed, its client went away): its
  // host program ends at its next tensor read, and then `stopped(ticket)` is told.
  virtual bool cancelled(size_t ticket) = 0;
  virtual void finished(size_t ticket, Value output) = 0;
  // Its user error, naming it by its number. `internal`: a failure of acrobat's own (InternalError)
  // or of the work of the whole batch it ran in.
  virtual void failed(size_t ticket, const std::string& message, bool internal) = 0;
  virtual void stopped(size_t ticket) = 0;
  // What instance `ticket`'s program emitted (emit(v)), as it does; the batched engines tell it,
  // the reference engine does not.
  virtual void emitted(size_t /*ticket*/, const Value& /*v*/) {}
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Runs the function `entry` on each input. A user error in any instance (an index out of range,
  // recursion too deep, ...) throws UserError naming the instance (numbered from `first_instance`,
  // for a batch cut from a larger input); no partial result is returned.
  virtual RunResult run(const std::vector<Value>& inputs, const std::string& entry = "main",
                        size_t first_instance = 0) = 0;
  // Runs `inputs` in consecutive batches of `batch` instances (0: one batch of all); instance
  // numbers in errors count from the start of `inputs`. By default one run() per batch; the
  // batched engines run consecutive batches side by side where they can (graph_engine.h).
  virtual RunResult run_batches(const std::vector<Value>& inputs, size_t batch,
                                const std::string& entry = "main");
  // Runs the loss function `entry` (loss_function) on each input as run() does and differentiates
  // the sum of the instances' losses with respect to every param, and with `wrt`
  // ParamsAndInputs also to the instances' tensors (GradResult). `zeroed`: zero tensors the
  // gradient may be added into (zero_grads), e.g. those of a training loop's previous step, which
  // its optimiser left zero.
  virtual GradResult gradients(const std::vector<Value>& inputs, const std::string& entry = "loss",
                               size_t first_instance = 0, std::vector<Tensor> zeroed = {},
                               GradWrt wrt = GradWrt::Params) = 0;
  // An open run of `entry` (continuous batching): the instances `feed` hands over join it as they
  // come and leave it when done, each answered at once (outputs as run() gives them). At most
  // `max_live` instances run at once. By default one instance after the other; the batched
  // engines batch every instance's work that is pending at a flush (graph_engine.h). Returns the
  // counters of the whole run (peak memory: the largest at any time).
  virtual RunStats run_open(InstanceFeed& feed, size_t max_live, const std::string& entry = "main");
  // Each instance of later runs may make at most `max_steps` calls, a loop's iterations (tail
  // calls) included; the one that makes more fails at that call (a loop that never ends stops
  // there). 0: no limit.
  void limit_steps(int64_t max_steps) { max_steps_ = max_steps; }

 protected:
  int64_t max_steps_ = 0;
};


// Engine::run_batches with `on_error`. With OnError::Skip, when a run fails the batches are run
// again one by one, each without its instances that fail: a failure that names its instance
// leaves that one out; one that names none (a failure of the batch as a whole) runs the batch's
// instances one at a time. The others' outputs are those of a run without the failed instances.
// Messages number instance i as `numbers[i]` (default: i; a server numbers each request's own).
RunResult run_batches(Engine& engine, const std::vector<Value>& inputs, size_t batch, const std::string& entry,
                      OnError on_error, const std::vector<size_t>& numbers = {});

// Calls `call(part)` with part = `inputs` and, while it throws a UserError naming one of part's
// instances (UserError::instance), tells `left_out` of that instance (its index in `inputs`, the
// error) and calls again without it. Returns the indices in `inputs` of the part the call
// succeeded on, ascending; empty when every instance failed (`call` then never succeeded). Any
// other error propagates. The first call gets `inputs` itself, not a copy.
std::vector<size_t> call_leaving_out_failures(const std::vector<Value>& inputs,
                                              FunctionRef<void(const std::vector<Value>&)> call,
                                              FunctionRef<void(size_t, const UserError&)> left_out);

// Checks that `entry` exists and takes exactly one parameter; returns its index.
int entry_function(const ir::Module& module, const std::string& entry);
// The same for an entry whose output is differentiated: it must also return one number (f32[],
// f32[1], f32[1, 1], ...); a positioned UserError otherwise.
int loss_function(const ir::Module& module, const std::string& entry);
// Zero gradients, one per param of `params` with its full shape: the tensors of `zeroed` (which must
// be zero) where one has the param's shape and nothing else holds its data, new zero ones
// elsewhere. A training loop passes its previous step's, which spares it a page fault per 4 KiB of
// fresh memory and a pass over every gradient per step.
std::vector<Tensor> zero_grads(const ParamStore& params, std::vector<Tensor> zeroed = {});

// The arguments of entry function `func` for one instance: the instance, then the values of the
// function's size variables (ir::Function::size_params), read from the instance's tensor shapes.
// Shapes that do not fit the parameter's type, or give one size two values, are a UserError.
std::vector<Value> entry_arguments(const ir::Module& module, int func, const Value& input);

// The tensors of an instance in the order GradResult::input_grads counts them: depth first, fields
// and list items left to right.
std::vector<std::shared_ptr<const Tensor>> instance_tensors(const Value& instance);

// The gradients of a run's input tensors (GradWrt::ParamsAndInputs) while an engine computes them:
// one zeroed leaf (InputLeaf) per stretch of memory the instances' tensors occupy (tensors that
// overlap, or one tensor at several places, share it), and afterwards each tensor's gradient.
class InputGradients {
 public:
  // A tensor that overlaps a param's memory is a UserError: its gradient and the param's could not
  // be told apart.
  InputGradients(const ir::Module& module, const ParamStore& params, const std::vector<Value>& inputs);
  const std::vector<InputLeaf>& leaves() const { return leaves_; }
  // Where the gradient of tensor `t` of the inputs starts (its leaf's, at its offset).
  float* gradient_of(const Tensor& t) const;
  // The gradients, per instance and tensor (GradResult::input_grads), once the leaves hold them.
  std::vector<std::vector<Tensor>> take();

 private:
  size_t leaf_of(const Tensor& t) const;  // the leaf holding a tensor of the inputs (not empty)

  std::vector<std::vector<std::shared_ptr<const Tensor>>> tensors_;  // per instance
  std::vector<InputLeaf> leaves_;                                    // by address
  std::vector<std::shared_ptr<float[]>> storage_;                    // each leaf's gradient
};

}  // namespace acrobat
