#include "runtime/aot_engine.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <unordered_map>

#include "acrobat/aot.h"
#include "acrobat/kernels.h"
#include "analysis/plan.h"
#include "codegen/build.h"
#include "codegen/emit_cpp.h"
#include "runtime/batch_operands.h"
#include "runtime/instance_driver.h"
#include "runtime/interpreter.h"
#include "runtime/reference_kernels.h"
#include "runtime/graph.h"
#include "ir/walk.h"

namespace acrobat {

namespace {

using aot::Obj;
using aot::Operand;
using aot::Val;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bump allocation of host objects (tuples, data-type values, closures) for one run.
class ObjectArena {
 public:
  Obj* alloc(int32_t tag, int32_t size) {
    size_t bytes = offsetof(Obj, fields) + sizeof(Val) * static_cast<size_t>(size > 0 ? size : 1);
    bytes = (bytes + 15) & ~size_t{15};
    if (chunks_.empty() || used_ + bytes > kChunk) {
      if (current_ + 1 < chunks_.size() && !chunks_.empty()) {
        ++current_;
      } else {
        chunks_.push_back(std::make_unique<char[]>(std::max(kChunk, bytes)));
        current_ = chunks_.size() - 1;
      }
      used_ = 0;
    }
    Obj* o = reinterpret_cast<Obj*>(chunks_[current_].get() + used_);
    used_ += bytes;
    o->tag = tag;
    o->size = size;
    return o;
  }
  void reset() {
    current_ = 0;
    used_ = 0;
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t current_ = 0, used_ = 0;
};

// What a runtime thread's kernel calls reach through their context.
struct KernelThread {
  aot::AotContext ctx{};
  Arena* scratch = nullptr;         // the graph's scratch of this thread, during a call
  int64_t* kernel_calls = nullptr;  // and its count of kernel launches
  AotEngine::State* state = nullptr;
};

}  // namespace

struct AotEngine::State : BlockExecutor, GraphEngine::Program {
  State(const ir::Module& m, Graph& g, InstanceDriver& d)
      : module(&m), plan(m.plan.get()), graph(g), driver(d) {}
  ~State() override {
    if (handle) dlclose(handle);
  }

  const ir::Module* module;
  const analysis::Plan* plan;
  Graph& graph;
  InstanceDriver& driver;
  void* handle = nullptr;
  const aot::AotModel* model = nullptr;
  aot::AotHost host{};
  aot::AotContext ctx{};  // the template of every instance's and thread's context
  std::vector<const ir::Rhs*> sites;
  std::vector<const float*> param_data;
  std::vector<int64_t> param_counts, param_rows;
  std::vector<Tensor> constant_storage;
  std::vector<const float*> constants;
  std::vector<std::unique_ptr<KernelThread>> threads;
  std::vector<aot::AotContext> contexts;  // one per instance of a run
  RunStats* stats = nullptr;
  int func = -1;  // of the run
  const std::vector<Value>* inputs = nullptr;
  std::vector<Val> outputs;
  ObjectArena objects;

  // ---- the program ----

  void begin_run(int f, const std::vector<Value>& in, RunStats& run_stats) override {
    const ir::Function& fn = module->functions[f];
    objects.reset();
    stats = &run_stats;
    func = f;
    inputs = &in;
    in_layout = layout_of(fn.vars[fn.params[0]].type);
    out_layout = layout_of(fn.ret);
    // One context (its call depth) per instance: with fibers, instances interleave.
    contexts.assign(in.size(), ctx);
    outputs.assign(in.size(), Val{});
  }

  void run_instance(size_t i) override {
    Val in = from_value((*inputs)[i], in_layout);
    outputs[i] = model->entry(&contexts[i], func, in);
  }

  Value output(size_t i) override { return to_value(outputs[i], out_layout); }

  BlockExecutor& executor() override { return *this; }

  // ---- the compiled block executor ----

  void run(const BatchCall& c) override {
    KernelThread& th = *threads[c.thread];
    th.scratch = c.scratch;
    aot::KernelCall call{&th.ctx, &host, c.B, c.args, c.outputs};
    th.kernel_calls = c.kernel_calls;
    model->kernels[c.block->id](call);
    *c.kernel_calls += static_cast<int64_t>(plan->kernels[c.block->id].steps.size());
  }

  // ---- services to the generated code ----

  static State& of(aot::AotContext* ctx) { return *static_cast<State*>(ctx->runtime); }
  static KernelThread& thread_of(aot::AotContext* ctx) {
    return *static_cast<KernelThread*>(ctx->runtime);
  }

  static int32_t record(aot::AotContext* ctx, int32_t block, const Val* args) {
    return of(ctx).graph.record(block, args);
  }

  // Each member gets a copy of the context: its own call depth.
  static void concurrently(aot::AotContext* ctx, int32_t n, aot::MemberFn const* members,
                           void* const* envs) {
    aot::AotContext few[4];
    std::vector<aot::AotContext> many;
    aot::AotContext* contexts = few;
    if (static_cast<size_t>(n) > std::size(few)) {
      many.resize(static_cast<size_t>(n));
      contexts = many.data();
    }
    for (int32_t k = 0; k < n; ++k) contexts[k] = *ctx;
    of(ctx).driver.concurrently(static_cast<size_t>(n),
                                [&](size_t k) { members[k](&contexts[k], envs[k]); });
  }

  static Obj* alloc_obj(aot::AotContext* ctx, int32_t tag, int32_t size) {
    return of(ctx).objects.alloc(tag, size);
  }

  static const float* read_tensor(aot::AotContext* ctx, Val v) {
    State& st = of(ctx);
    if (v.node >= 0) st.driver.wait_for(st.graph, v.node);
    st.stats->kernel_calls++;
    st.stats->tensor_ops++;
    return st.graph.data(v);
  }

  static void fail(aot::AotContext* ctx, int32_t site, int64_t a, int64_t b) {
    State& st = of(ctx);
    (void)b;
    ACROBAT_ASSERT(site >= 0 && static_cast<size_t>(site) < st.sites.size() && st.sites[site],
                   "AOT error site");
    const ir::Rhs& r = *st.sites[site];
    switch (r.kind) {
      case ir::RhsKind::ParamIndex:
        throw UserError(r.span.begin, "index " + std::to_string(a) + " is out of range for param '" +
                                          st.module->params[r.index].name + "' of " +
                                          std::to_string(st.param_counts[r.index]) + " entries");
      case ir::RhsKind::Host:
        throw UserError(r.span.begin, a == 0 ? "integer division by zero" : "integer division overflows");
      case ir::RhsKind::Match:
        throw UserError(r.span.begin,
                        "no match clause matches the value (the match is not exhaustive for "
                        "nested patterns)");
      case ir::RhsKind::Call:
        ACROBAT_ASSERT(a >= 0, "a closure of an unknown function");
        throw UserError(r.span.begin, "recursion deeper than " +
                                          std::to_string(Interpreter::kMaxCallDepth) + " calls (in '" +
                                          st.module->functions[a].name + "')");
      default: break;
    }
    ACROBAT_ASSERT(false, "AOT error at an unexpected site");
  }

  static float* scratch(aot::AotContext* ctx, int64_t floats) {
    return thread_of(ctx).scratch->alloc(static_cast<size_t>(floats));
  }

  static void gemm_packed(int64_t M, const float* A, int64_t lda, const void* packed, float* C,
                          int64_t ldc, bool accumulate) {
    kernels::gemm_packed(static_cast<int>(M), A, static_cast<int>(lda),
                         *static_cast<const kernels::PackedWeights*>(packed), C,
                         static_cast<int>(ldc), accumulate);
  }

  // Any operator the generated kernel leaves to the library.
  static void op(aot::AotContext* ctx, int32_t block, int32_t index, int64_t B, const Operand* in,
                 float* out) {
    KernelThread& t = thread_of(ctx);
    const Graph& g = t.state->graph;
    // A grouped matmul launches one GEMM per matrix: the extra ones count as kernel calls.
    *t.kernel_calls += run_library_op(g.plan().blocks[block], static_cast<size_t>(index), B, in, out,
                                      *t.scratch, g.packed()) - 1;
  }

  // ---- values in and out ----

  // A type as the conversions need it, built once per type: data types point back into the graph
  // (a Tree's fields are Trees), so a conversion never substitutes type parameters per value.
  struct Layout {
    TypeKind kind;
    const AdtDef* adt = nullptr;
    std::vector<const Layout*> elems;                // tuple elements
    std::vector<std::vector<const Layout*>> fields;  // data type: per constructor
    std::vector<int64_t> shape;                      // tensor
  };
  std::map<std::string, std::unique_ptr<Layout>> layouts_;
  const Layout* in_layout = nullptr;   // of the run's entry function
  const Layout* out_layout = nullptr;

  const Layout* layout_of(const Type& t) {
    std::string key = type_str(t);
    auto it = layouts_.find(key);
    if (it != layouts_.end()) return it->second.get();
    Layout* l = (layouts_[key] = std::make_unique<Layout>()).get();
    l->kind = t->kind;
    l->shape = t->shape;
    l->adt = t->adt;
    if (t->kind == TypeKind::Tuple)
      for (const auto& e : t->args) l->elems.push_back(layout_of(e));
    if (t->kind == TypeKind::Adt)
      for (const auto& c : t->adt->ctors) {
        std::vector<const Layout*> fs;
        for (const auto& f : c->fields) fs.push_back(layout_of(substitute_params(f, t->adt->type_params, t->args)));
        l->fields.push_back(std::move(fs));
      }
    if (t->kind != TypeKind::Int && t->kind != TypeKind::Float && t->kind != TypeKind::Bool &&
        t->kind != TypeKind::Tensor && t->kind != TypeKind::Tuple && t->kind != TypeKind::Adt)
      throw UserError("the AOT engine cannot pass a value of type " + type_str(t) +
                      " in or out of the model");
    return l;
  }

  Val from_value(const Value& v, const Layout* l) {
    Val out{};
    out.node = -1;
    switch (l->kind) {
      case TypeKind::Int: out.i = v.i; break;
      case TypeKind::Float: out.f = v.f; break;
      case TypeKind::Bool: out.i = v.b ? 1 : 0; break;
      case TypeKind::Tensor: out.data = v.tensor->data.get(); break;
      case TypeKind::Tuple: {
        if (l->elems.empty()) break;
        Obj* o = objects.alloc(0, static_cast<int32_t>(l->elems.size()));
        for (size_t i = 0; i < l->elems.size(); ++i) o->fields[i] = from_value(v.agg->fields[i], l->elems[i]);
        out.p = o;
        break;
      }
      default: {  // a data type
        const CtorDef* c = v.agg->ctor;
        const auto& fields = l->fields[c->tag];
        Obj* o = objects.alloc(c->tag, static_cast<int32_t>(fields.size()));
        for (size_t i = 0; i < fields.size(); ++i) o->fields[i] = from_value(v.agg->fields[i], fields[i]);
        out.p = o;
        break;
      }
    }
    return out;
  }

  Value to_value(const Val& v, const Layout* l) {
    switch (l->kind) {
      case TypeKind::Int: return Value::of_int(v.i);
      case TypeKind::Float: return Value::of_float(v.f);
      case TypeKind::Bool: return Value::of_bool(v.i != 0);
      case TypeKind::Tensor: {
        Tensor out = Tensor::allocate(l->shape);
        const float* src = graph.data(v);
        std::memcpy(out.data.get(), src, out.size() * sizeof(float));
        return Value::of_tensor(std::move(out));
      }
      case TypeKind::Tuple: {
        if (l->elems.empty()) return Value::unit();
        std::vector<Value> fields;
        for (size_t i = 0; i < l->elems.size(); ++i) fields.push_back(to_value(v.p->fields[i], l->elems[i]));
        return Value::tuple(std::move(fields));
      }
      default: {
        const CtorDef* c = l->adt->ctors[v.p->tag].get();
        const auto& types = l->fields[v.p->tag];
        std::vector<Value> fields;
        for (size_t i = 0; i < types.size(); ++i) fields.push_back(to_value(v.p->fields[i], types[i]));
        return Value::adt(c, std::move(fields));
      }
    }
  }
};

AotEngine::AotEngine(std::shared_ptr<const ir::Module> module,
                     std::shared_ptr<const ParamStore> params, const AotOptions& options)
    : GraphEngine(std::move(module), std::move(params), options.scheduler, options.threads,
                  options.fibers),
      state_(std::make_unique<State>(*module_, graph(), driver())) {
  set_program(*state_);
  State& st = *state_;

  auto t0 = Clock::now();
  codegen::GeneratedCpp code = codegen::emit_cpp(*module_);
  build_.generate_seconds = seconds_since(t0);
  if (options.object.empty()) {
    codegen::BuiltObject built = codegen::build_shared_object(code, options.cache_dir);
    build_.object_path = built.path;
    build_.cached = built.cached;
    build_.compile_seconds = built.seconds;
  } else {
    build_.object_path = options.object;
  }
  auto t1 = Clock::now();
  const std::string& path = build_.object_path;
  st.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!st.handle) throw UserError(path + ": cannot load the compiled model: " + dlerror());
  using ModelFn = const aot::AotModel* (*)();
  auto fn = reinterpret_cast<ModelFn>(dlsym(st.handle, "acrobat_aot_model"));
  if (!fn) throw UserError(path + ": not a model compiled by acrobat (no acrobat_aot_model)");
  st.model = fn();
  if (st.model->abi_version != aot::kAbiVersion)
    throw UserError(path + ": compiled for runtime interface version " +
                    std::to_string(st.model->abi_version) + ", this acrobat has version " +
                    std::to_string(aot::kAbiVersion) + "; compile the model again");
  if (code.hash != st.model->source_hash)
    throw UserError(path + ": compiled from a different model, dims or analyses (code " +
                    st.model->source_hash + ", expected " + code.hash +
                    "); compile it again with the same --set and --disable options");
  build_.load_seconds = seconds_since(t1);

  st.sites = ir::nodes_by_site(*module_);  // generated code names IR places by site
  for (size_t p = 0; p < params_->params.size(); ++p) {
    const auto& pv = params_->params[p];
    st.param_data.push_back(pv.tensor.data.get());
    st.param_counts.push_back(pv.count);
    st.param_rows.push_back(num_elements(pv.elem_shape));
  }
  // Constants are computed once, with the reference kernels, and addressed by IR site.
  st.constants.assign(st.sites.size(), nullptr);
  for (size_t i = 0; i < st.sites.size(); ++i) {
    if (!st.sites[i]) continue;
    const ir::Rhs& r = *st.sites[i];
    if (r.kind != ir::RhsKind::Op || !r.args.empty() || op_info(r.op).op_class != OpClass::Constant)
      continue;
    Tensor t = constant_value(r);
    st.constants[i] = t.data.get();
    st.constant_storage.push_back(std::move(t));
  }

  st.host.record = &State::record;
  st.host.alloc_obj = &State::alloc_obj;
  st.host.concurrently = &State::concurrently;
  st.host.read_tensor = &State::read_tensor;
  st.host.fail = &State::fail;
  st.host.scratch = &State::scratch;
  st.host.gemm_packed = &State::gemm_packed;
  st.host.op = &State::op;
  st.ctx.host = &st.host;
  st.ctx.runtime = &st;
  st.ctx.params = st.param_data.data();
  st.ctx.param_counts = st.param_counts.data();
  st.ctx.param_row_sizes = st.param_rows.data();
  st.ctx.constants = st.constants.data();
  st.ctx.num_nodes = st.graph.num_nodes();
  st.ctx.max_call_depth = Interpreter::kMaxCallDepth;

  for (int t = 0; t < st.graph.threads(); ++t) {
    auto th = std::make_unique<KernelThread>();
    th->state = &st;
    th->ctx = st.ctx;
    th->ctx.runtime = th.get();
    st.threads.push_back(std::move(th));
  }
}


AotEngine::~AotEngine() = default;

}  // namespace acrobat
