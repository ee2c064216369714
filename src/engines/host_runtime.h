// The runtime side of a host program over aot::Val, the same for both batched engines: the
// compiled engine's generated program (codegen/emit_host.cpp) and the interpreted engine's host
// interpreter (engines/host_interpreter.h) both run one instance at a time against an
// aot::AotContext and reach the runtime only through its aot::AotHost services: record a static
// block execution into the graph, allocate a tuple, data-type value or closure in the run's object
// arena, read a tensor (waiting for it on the instance's fiber), run a group of calls concurrently,
// fail with the user error of an IR site, hand over and give up references to lazy tensors. This class provides those services, the context's
// parameter and constant tables, and the conversion of the run's inputs and outputs between Value
// and Val.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "acrobat/aot.h"
#include "engines/graph_engine.h"

namespace acrobat {

// Bump allocation of host objects (tuples, data-type values, closures) for one run.
class ObjectArena {
 public:
  aot::Obj* alloc(int32_t tag, int32_t size);
  void reset() {
    current_ = 0;
    used_ = 0;
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t current_ = 0, used_ = 0;
};

class HostRuntime : public GraphEngine::Program {
 public:
  HostRuntime(const ir::Module& module, const ParamStore& params, Graph& graph,
              InstanceDriver& driver);
  ~HostRuntime() override;

  void begin_run(int func, const std::vector<Value>& inputs, RunStats& stats, int64_t max_steps) override;
  size_t join(const Value& input) override;
  void run_instance(size_t i) override;
  Value output(size_t i) override;
  bool demand_output(size_t i) override;
  void release_output(size_t i) override;
  int32_t waiting_for(size_t i) const override { return waiting_[i]; }
  aot::Val output_val(size_t i) const override {
    return entry_->made_by >= 0 ? outputs_[i].p->fields[0] : outputs_[i];
  }

 protected:
  // Runs entry function `func` of the host program for one instance: args are its parameters,
  // the instance and then the values of its size variables.
  virtual aot::Val enter(aot::AotContext* ctx, int32_t func, const aot::Val* args) = 0;

  const ir::Module& module_;
  Graph& graph_;
  // The services; an engine whose kernels call back into the runtime adds those entries.
  aot::AotHost host_{};
  // The template of every instance's context (each instance gets a copy: its call depth).
  aot::AotContext ctx_{};

 private:
  struct Layout;
  const Layout* layout_of(const Type& t);
  // out[k] = values[k] (of layout l) as a host value, for k < n.
  void from_values(const Value* const* values, size_t n, const Layout* l, aot::Val* out);
  // `sizes`: the instance's values of out_dims_ (its output's shapes may have them).
  Value to_value(const aot::Val& v, const Layout* l, const int64_t* sizes);
  // Appends an instance reading `input` (kept alive by the caller) to the run; its index.
  size_t add_instance(const Value* input);
  // f(t) for every lazy tensor t (a graph node's output) of value `v`.
  template <class F>
  void for_each_lazy(const aot::Val& v, const Layout* l, F&& f);

  static HostRuntime& of(aot::AotContext* ctx) { return *static_cast<HostRuntime*>(ctx->runtime); }
  static int32_t record(aot::AotContext* ctx, int32_t block, const aot::Val* args);
  static aot::Obj* alloc_obj(aot::AotContext* ctx, int32_t tag, int32_t size);
  static const float* read_tensor(aot::AotContext* ctx, aot::Val v);
  static void concurrently(aot::AotContext* ctx, int32_t n, aot::MemberFn const* members,
                           void* const* envs);
  [[noreturn]] static void fail(aot::AotContext* ctx, int32_t site, int64_t a, int64_t b);
  static void dup(aot::AotContext* ctx, aot::Val v);
  static void drop(aot::AotContext* ctx, aot::Val v);
  static const float* gather(aot::AotContext* ctx, int32_t site, aot::Val list, int64_t length);
  static void emit(aot::AotContext* ctx, int32_t site, aot::Val v);

  InstanceDriver& driver_;
  std::vector<const ir::Rhs*> sites_;  // the IR node of each site: where errors are reported
  std::vector<const float*> param_data_;
  std::vector<int64_t> param_counts_, param_rows_;
  std::vector<Tensor> constant_storage_;
  std::vector<const float*> constants_;  // by IR site
  ObjectArena objects_;
  // from_values' worklist: a value still to convert, its layout and where its Val goes.
  struct ValueItem {
    const Value* value;
    const Layout* layout;
    aot::Val* slot;
  };
  std::vector<ValueItem> value_items_;

  // Per run.
  RunStats* stats_ = nullptr;
  int func_ = -1;  // the entry function, or the one that returns its result with its sizes
  const ir::Function* entry_ = nullptr;  // the entry function the run was asked for
  // The size variables the output's shapes may have: the entry's parameters', then the ones its
  // result makes (ir::Function::made_by).
  std::vector<int64_t> out_dims_;
  std::vector<const Value*> inputs_;  // the run's, then the ones that joined it (join())
  std::vector<aot::Val> in_vals_;     // the inputs converted so far (run_instance)
  std::deque<Value> joined_;          // the inputs that joined the run: theirs are kept here
  // Deques: a suspended instance holds its context while others join the run.
  std::deque<aot::AotContext> contexts_;  // one per instance: with fibers, instances interleave
  std::deque<int64_t> steps_;             // per instance, its calls so far (aot::count_step)
  std::deque<aot::Val> outputs_;
  std::deque<int32_t> waiting_;  // per instance, the node its read waits for, or -1 (waiting_for)
  int64_t max_steps_ = 0;
  std::vector<int64_t> entry_sizes_;  // per instance, the entry function's size_params values
  Arena gathered_;                    // rows gathered by lists of indices, for the run
  std::vector<const float*> gather_sources_;  // of one gather (Graph::gathered)
  std::map<std::string, std::unique_ptr<Layout>> layouts_;
  const Layout* in_layout_ = nullptr;  // of the run's entry function
  const Layout* out_layout_ = nullptr;  // of the entry's result (without the sizes it makes)
};

}  // namespace acrobat
