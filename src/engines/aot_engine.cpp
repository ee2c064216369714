#include "engines/aot_engine.h"

#include <dlfcn.h>

#include <chrono>
#include <sstream>

#include "acrobat/aot.h"
#include "acrobat/kernels.h"
#include "analysis/plan.h"
#include "codegen/build.h"
#include "codegen/emit_cpp.h"
#include "runtime/batch_operands.h"
#include "engines/host_runtime.h"
#include "runtime/graph.h"
#include "runtime/shared_products.h"
#include "support/clock.h"

namespace acrobat {

namespace {

using aot::Operand;

// Whether this CPU has instruction-set extension `name` (a word of ACROBAT_AOT_ISA).
bool cpu_has(const std::string& name) {
  __builtin_cpu_init();
  if (name == "x86-64") return true;
  if (name == "avx") return __builtin_cpu_supports("avx");
  if (name == "avx2") return __builtin_cpu_supports("avx2");
  if (name == "fma") return __builtin_cpu_supports("fma");
  if (name == "avx512f") return __builtin_cpu_supports("avx512f");
  if (name == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (name == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (name == "avx512vl") return __builtin_cpu_supports("avx512vl");
  return false;
}

// What a runtime thread's kernel calls reach through their context.
struct KernelThread {
  aot::AotContext ctx{};
  Arena* scratch = nullptr;         // the graph's scratch of this thread, during a call
  int64_t* kernel_calls = nullptr;  // and its count of kernel launches
  AotEngine::State* state = nullptr;
};

}  // namespace

// The host runtime with the generated host program and the generated kernels.
struct AotEngine::State : HostRuntime, BlockExecutor {
  State(const ir::Module& m, const ParamStore& p, Graph& g, InstanceDriver& d,
        std::shared_ptr<void> lib, const aot::AotModel* mod)
      : HostRuntime(m, p, g, d), plan(m.plan.get()), library(std::move(lib)), model(mod) {
    add_kernel_services();
  }

  const analysis::Plan* plan;
  std::shared_ptr<void> library;  // keeps the object loaded
  const aot::AotModel* model;
  std::vector<std::unique_ptr<KernelThread>> threads;

  aot::Val enter(aot::AotContext* ctx, int32_t func, const aot::Val* args) override {
    return model->entry(ctx, func, args);
  }
  BlockExecutor& executor() override { return *this; }

  // The contexts the generated code runs with get the kernel services too.
  void add_kernel_services() {
    host_.scratch = &State::scratch;
    host_.gemm_packed = &State::gemm_packed;
    host_.op = &State::op;
    for (int t = 0; t < graph_.threads(); ++t) {
      auto th = std::make_unique<KernelThread>();
      th->state = this;
      th->ctx = ctx_;
      th->ctx.runtime = th.get();
      threads.push_back(std::move(th));
    }
  }

  // ---- the compiled block executor ----

  void run(const BatchCall& c) override {
    KernelThread& th = *threads[c.thread];
    th.scratch = c.scratch;
    aot::KernelCall call{&th.ctx, &host_, c.B, c.args, c.outputs};
    th.kernel_calls = c.kernel_calls;
    model->kernels[c.block->id](call);
    *c.kernel_calls += static_cast<int64_t>(plan->kernels[c.block->id].steps.size());
  }

  aot::FusedAdjoint fused_adjoint(const analysis::StaticBlock& s, size_t step) const override {
    const aot::FusedAdjoint* const block = model->adjoints[s.id];
    return block ? block[step] : nullptr;
  }

  // ---- kernel services to the generated code ----

  static KernelThread& thread_of(aot::AotContext* ctx) {
    return *static_cast<KernelThread*>(ctx->runtime);
  }

  static float* scratch(aot::AotContext* ctx, int64_t floats) {
    return thread_of(ctx).scratch->alloc(static_cast<size_t>(floats));
  }

  static void gemm_packed(int64_t M, const float* A, int64_t lda, const void* packed, float* C,
                          int64_t ldc, bool accumulate) {
    gemm_packed_shared(static_cast<int>(M), A, static_cast<int>(lda), *static_cast<const kernels::PackedWeights*>(packed),
                       C, static_cast<int>(ldc), accumulate);
  }

  // Any operator the generated kernel leaves to the library.
  static void op(aot::AotContext* ctx, int32_t block, int32_t index, int64_t B, const Operand* in,
                 float* out) {
    KernelThread& t = thread_of(ctx);
    const Graph& g = t.state->graph_;
    // A grouped matmul launches one GEMM per matrix: the extra ones count as kernel calls.
    const std::vector<int>& pieces = g.plan().kernels[block].concat_pieces;
    *t.kernel_calls += run_library_op(g.plan().blocks[block], static_cast<size_t>(index), B, in, out,
                                      *t.scratch, g.packed(),
                                      size_t(index) < pieces.size() ? pieces[size_t(index)] : -1) - 1;
  }

};

AotEngine::AotEngine(std::shared_ptr<const ir::Module> module,
                     std::shared_ptr<const ParamStore> params, const AotOptions& options)
    : GraphEngine(std::move(module), std::move(params), options.scheduler, options.threads,
                  options.fibers) {

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
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw UserError(path + ": cannot load the compiled model: " + dlerror());
  library_ = std::shared_ptr<void>(handle, [](void* h) { dlclose(h); });
  using ModelFn = const aot::AotModel* (*)();
  auto fn = reinterpret_cast<ModelFn>(dlsym(handle, "acrobat_aot_model"));
  if (!fn) throw UserError(path + ": not a model compiled by acrobat (no acrobat_aot_model)");
  model_ = fn();
  if (model_->abi_version != aot::kAbiVersion)
    throw UserError(path + ": compiled for runtime interface version " +
                    std::to_string(model_->abi_version) + ", this acrobat has version " +
                    std::to_string(aot::kAbiVersion) + "; compile the model again");
  {
    std::istringstream words(model_->isa ? model_->isa : "");
    for (std::string w; words >> w;)
      if (!cpu_has(w))
        throw UserError(path + ": compiled for a CPU with " + w + ", which this CPU lacks (the object needs: " +
                        model_->isa + "); compile the model again on this machine");
  }
  if (code.hash != model_->source_hash)
    throw UserError(path + ": compiled from a different model, dims or analyses (code " +
                    model_->source_hash + ", expected " + code.hash +
                    "); compile it again with the same --set and --disable options");
  build_.load_seconds = seconds_since(t1);
}

AotEngine::~AotEngine() = default;

std::unique_ptr<GraphEngine::Program> AotEngine::make_program(Graph& graph, InstanceDriver& driver) {
  return std::make_unique<State>(*module_, *params_, graph, driver, library_, model_);
}

}  // namespace acrobat
