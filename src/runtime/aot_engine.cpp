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
#include "runtime/arena.h"
#include "runtime/batched_kernels.h"
#include "runtime/fibers.h"
#include "runtime/interpreter.h"
#include "runtime/reference_kernels.h"
#include "runtime/schedule.h"
#include "runtime/thread_pool.h"

namespace acrobat {

namespace {

using aot::Obj;
using aot::Operand;
using aot::Val;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A batch is split across threads only when it has at least this much work: below it, waking the
// workers costs more than they save.
constexpr double kMinParallelFlops = 4e6;

struct Node {
  int block;
  int phase = 0;
  int depth = 0;
  uint32_t external_begin = 0;
  int batch = -1;
  int row = 0;
};

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

struct KernelThread {
  aot::AotContext ctx{};
  Arena scratch;
  std::vector<const float*> pointers;
  std::vector<const kernels::PackedWeights*> packed;
  AotEngine::State* state = nullptr;
};

}  // namespace

struct AotEngine::State {
  const ir::Module* module = nullptr;
  const analysis::Plan* plan = nullptr;
  void* handle = nullptr;
  const aot::AotModel* model = nullptr;
  aot::AotHost host{};
  aot::AotContext ctx{};
  int32_t num_nodes = 0;  // what contexts' num_nodes point to
  std::unique_ptr<InstanceFibers> fibers;  // programs that read tensors
  std::vector<const ir::Rhs*> sites;
  std::vector<const float*> param_data;
  std::vector<int64_t> param_counts, param_rows;
  std::vector<Tensor> constant_storage;
  std::vector<const float*> constants;
  std::unordered_map<const float*, const kernels::PackedWeights*> packed;
  std::unique_ptr<ThreadPool> pool;
  std::vector<std::unique_ptr<KernelThread>> threads;
  // One run:
  RunStats* stats = nullptr;
  std::vector<Node> nodes;
  std::vector<Val> externals;
  std::vector<std::vector<float*>> batch_outputs;
  Buckets buckets;
  std::vector<int> demanded;  // nodes whose values waiting tensor reads need
  std::vector<uint32_t> marks;
  uint32_t stamp = 0;
  Arena arena;
  ObjectArena objects;
  std::vector<std::vector<const float*>> rows;  // per argument of the batch being run
  double flush_seconds = 0;

  ~State() {
    if (handle) dlclose(handle);
  }

  void reset_run(RunStats& s) {
    stats = &s;
    nodes.clear();
    externals.clear();
    batch_outputs.clear();
    buckets.clear();
    demanded.clear();
    arena.reset();
    arena.reset_peak();
    objects.reset();
    flush_seconds = 0;
    num_nodes = 0;
  }

  const float* output_of(const Val& v) const {
    const Node& n = nodes[v.node];
    return batch_outputs[n.batch][v.slot] + n.row * plan->blocks[n.block].ops[v.slot].size;
  }

  // ---- services to the generated code ----

  static State& of(aot::AotContext* ctx) { return *static_cast<State*>(ctx->runtime); }
  static KernelThread& thread_of(aot::AotContext* ctx) {
    return *static_cast<KernelThread*>(ctx->runtime);
  }

  static int32_t record(aot::AotContext* ctx, int32_t block, const Val* args) {
    State& st = of(ctx);
    const analysis::StaticBlock& s = st.plan->blocks[block];
    Placement place;
    for (size_t a = 0; a < s.args.size(); ++a) {
      const Val& v = args[a];
      if (v.node < 0) continue;
      const Node& in = st.nodes[v.node];
      if (in.batch < 0)
        place.add_input(in.phase, in.depth, v.phase_ends, v.ghost);
      else
        place.add_computed_input(in.phase, v.phase_ends, v.ghost);
    }
    Node n{block, place.phase, place.node_depth(), static_cast<uint32_t>(st.externals.size())};
    st.externals.insert(st.externals.end(), args, args + s.args.size());
    int32_t id = static_cast<int32_t>(st.nodes.size());
    st.nodes.push_back(n);
    add_to_bucket(st.buckets, n.phase, n.depth, block, id);
    st.stats->tensor_ops += static_cast<int64_t>(s.ops.size());
    st.stats->flops += s.flops;
    st.num_nodes = id + 1;
    return id;
  }

  static Obj* alloc_obj(aot::AotContext* ctx, int32_t tag, int32_t size) {
    return of(ctx).objects.alloc(tag, size);
  }

  static const float* read_tensor(aot::AotContext* ctx, Val v) {
    State& st = of(ctx);
    if (v.node < 0) return v.data;
    if (st.nodes[v.node].batch < 0) {
      // On a fiber: wait until every instance waits, then what they wait for runs. Otherwise run
      // it now.
      st.demanded.push_back(v.node);
      if (st.fibers && st.fibers->inside())
        st.fibers->wait();
      else
        st.flush();
      ACROBAT_ASSERT(st.nodes[v.node].batch >= 0, "a tensor read resumed before its node ran");
    }
    st.stats->kernel_calls++;
    st.stats->tensor_ops++;
    return st.output_of(v);
  }

  static void fail(aot::AotContext* ctx, int32_t site, int64_t a, int64_t b) {
    State& st = of(ctx);
    (void)b;
    ACROBAT_ASSERT(site >= 0 && static_cast<size_t>(site) < st.sites.size(), "AOT error site");
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
    return thread_of(ctx).scratch.alloc(static_cast<size_t>(floats));
  }

  static void gemm_packed(int64_t M, const float* A, int64_t lda, const void* packed, float* C,
                          int64_t ldc, bool accumulate) {
    kernels::gemm_packed(static_cast<int>(M), A, static_cast<int>(lda),
                         *static_cast<const kernels::PackedWeights*>(packed), C,
                         static_cast<int>(ldc), accumulate);
  }

  // Any operator the generated kernel leaves to the library: the batched kernels of the registry,
  // with scattered rows gathered first (concat reads them in place) and scattered weights grouped.
  static void op(aot::AotContext* ctx, int32_t block, int32_t index, int64_t B, const Operand* in,
                 float* out) {
    KernelThread& t = thread_of(ctx);
    const analysis::StaticBlock& s = t.state->plan->blocks[block];
    const analysis::BlockOp& op = s.ops[index];
    std::vector<BatchOperand> ops(op.operands.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& o = op.operands[i];
      ops[i].shape = o.local ? &s.ops[o.index].shape : &s.args[o.index].shape;
      ops[i].packed = static_cast<const kernels::PackedWeights*>(in[i].packed);
      if (in[i].data) {
        ops[i].data = in[i].data;
        ops[i].stride = in[i].stride;
      } else {
        ops[i].rows = in[i].rows;
      }
    }
    auto gather = [&](BatchOperand& x) {
      if (x.data || !x.rows) return;
      int64_t n = num_elements(*x.shape);
      float* panel = t.scratch.alloc(static_cast<size_t>(B * n));
      for (int64_t b = 0; b < B; ++b) std::memcpy(panel + b * n, x.rows[b], n * sizeof(float));
      x.data = panel;
      x.stride = n;
      x.rows = nullptr;
    };
    if (op.rhs->op == OpId::MatMul && !(ops[1].data && ops[1].stride == 0)) {
      t.pointers.resize(static_cast<size_t>(B));
      t.packed.resize(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) {
        t.pointers[b] = ops[1].data ? ops[1].data + b * ops[1].stride : ops[1].rows[b];
        t.packed[b] = static_cast<const kernels::PackedWeights*>(t.state->packed_of(t.pointers[b]));
      }
      gather(ops[0]);
      batched_matmul_grouped(B, ops[0], t.pointers.data(), t.packed.data(), op.shape, out, t.scratch);
      return;
    }
    if (op.rhs->op != OpId::Concat)
      for (auto& x : ops) gather(x);
    batched_kernel(op.rhs->op)(op.rhs->attrs, B, ops, op.shape, out);
  }

  // ---- execution ----

  void run_batch(int block, const std::vector<int>& batch_ids) {
    const analysis::StaticBlock& s = plan->blocks[block];
    // Instances picking the same matrix of an indexed param next to each other (see
    // batched_matmul_grouped).
    const std::vector<int> sorted_ids = ordered_by_indexed_weights(
        s, batch_ids, [&](int id, int e) { return externals[nodes[id].external_begin + e].data; });
    const std::vector<int>& ids = sorted_ids.empty() ? batch_ids : sorted_ids;
    int64_t B = static_cast<int64_t>(ids.size());
    int batch = static_cast<int>(batch_outputs.size());
    for (size_t r = 0; r < ids.size(); ++r) {
      nodes[ids[r]].batch = batch;
      nodes[ids[r]].row = static_cast<int>(r);
    }
    std::vector<float*>& outputs = batch_outputs.emplace_back(s.ops.size(), nullptr);
    for (size_t k = 0; k < s.ops.size(); ++k)
      if (s.ops[k].escapes) outputs[k] = arena.alloc(static_cast<size_t>(B * s.ops[k].size));

    std::vector<Operand> args(s.args.size());
    if (rows.size() < args.size()) rows.resize(args.size());
    for (size_t e = 0; e < args.size(); ++e) {
      const analysis::BlockArg& arg = s.args[e];
      if (arg.known && arg.mode == analysis::ArgMode::Reuse) {
        const Val& v = externals[nodes[ids[0]].external_begin + e];
        args[e] = Operand{v.data, 0, nullptr, packed_of(v.data)};
        continue;
      }
      std::vector<const float*>& r = rows[e];
      r.resize(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) {
        const Val& v = externals[nodes[ids[b]].external_begin + e];
        r[b] = v.node >= 0 ? output_of(v) : v.data;
      }
      int64_t n = num_elements(arg.shape);
      bool shared = true, strided = true;
      for (int64_t b = 1; b < B; ++b) {
        shared = shared && r[b] == r[0];
        strided = strided && r[b] == r[0] + b * n;
      }
      if (shared)
        args[e] = Operand{r[0], 0, nullptr, packed_of(r[0])};
      else if (strided)
        args[e] = Operand{r[0], n, nullptr, nullptr};
      else
        args[e] = Operand{nullptr, 0, r.data(), nullptr};
    }

    int tasks = 1;
    if (pool && B >= 2 && double(B) * double(s.flops) >= kMinParallelFlops)
      tasks = static_cast<int>(std::min<int64_t>(pool->size(), B));
    aot::BlockKernel kernel = model->kernels[block];
    const int64_t chunk = chunk_instances(s);
    auto run_part = [&](int t) {
      KernelThread& th = *threads[t];
      // This thread's instances, a chunk at a time.
      for (int64_t b0 = B * t / tasks, end = B * (t + 1) / tasks; b0 < end; b0 += chunk) {
        int64_t b1 = std::min(end, b0 + chunk);
        th.scratch.reset();
        std::vector<Operand> part(args);
        std::vector<float*> outs(outputs);
        if (b0 > 0) {
          for (auto& a : part) {
            if (a.data) a.data += b0 * a.stride;
            else a.rows += b0;
          }
          for (size_t k = 0; k < outs.size(); ++k)
            if (outs[k]) outs[k] += b0 * s.ops[k].size;
        }
        aot::KernelCall call{&th.ctx, &host, b1 - b0, part.data(), outs.data()};
        kernel(call);
      }
    };
    if (tasks == 1) run_part(0);
    else pool->run(tasks, run_part);
    stats->batches++;
    stats->kernel_calls++;
    auto& counts = stats->blocks[s.name];
    counts.nodes += B;
    counts.batches++;
    size_t scratch_peak = 0;
    for (const auto& th : threads) scratch_peak += th->scratch.peak_bytes();
    stats->peak_bytes = std::max<int64_t>(stats->peak_bytes,
                                          static_cast<int64_t>(arena.peak_bytes() + scratch_peak));
  }

  // Instances per kernel call. A block whose intermediate values are large per instance (a
  // transformer layer: 64 x 1024 floats after the first feed-forward GEMM; MV-RNN's phrase
  // matrices) runs its batch in chunks whose intermediates stay in L2, as one instance's do in the
  // reference engine. A chunk still gives the block's main GEMMs on shared weights the 64 rows at
  // which they run at full speed (kernels' row blocks), so one-row cells (Tree-LSTM, RNNs) keep
  // their batches whole. Measured on BERxiT small and MV-RNN H=64, batch 64, against no chunks
  // (three interleaved pairs each): +14-41% and +19-47% at 512 KiB, within noise of 256 KiB and
  // 1 MiB.
  static constexpr int64_t kChunkFloats = int64_t{1} << 17;  // 512 KiB
  static constexpr int64_t kGemmRows = 64;
  static int64_t chunk_instances(const analysis::StaticBlock& s) {
    int64_t per_instance = 0, rows = kGemmRows;
    for (const auto& op : s.ops) {
      if (!op.view && !op.fused) per_instance += op.size;
      bool shared_weight = op.rhs->op == OpId::MatMul && !op.operands[1].local &&
                           s.args[op.operands[1].index].mode != analysis::ArgMode::Scatter;
      if (shared_weight && 4 * op.rhs->flops >= s.flops) rows = std::min(rows, op.shape[0]);
    }
    int64_t by_cache = kChunkFloats / std::max<int64_t>(1, per_instance);
    int64_t by_rows = (kGemmRows + rows - 1) / rows;
    return std::max<int64_t>({1, by_cache, by_rows});
  }

  const void* packed_of(const float* data) const {
    auto it = packed.find(data);
    return it == packed.end() ? nullptr : it->second;
  }

  // Runs what the tensor reads in `demanded` wait for, or (none demanded) everything pending.
  void flush() {
    auto t0 = Clock::now();
    auto run = [&](int block, const std::vector<int>& ids) { run_batch(block, ids); };
    if (demanded.empty()) {
      run_all(buckets, run);
    } else {
      auto inputs = [&](int n, auto&& f) {
        const Node& node = nodes[n];
        size_t count = plan->blocks[node.block].args.size();
        for (size_t a = 0; a < count; ++a) {
          const Val& v = externals[node.external_begin + a];
          if (v.node >= 0 && nodes[v.node].batch < 0) f(v.node);
        }
      };
      run_demanded(buckets, demanded, nodes.size(), marks, stamp, inputs, run);
      demanded.clear();
    }
    double s = seconds_since(t0);
    flush_seconds += s;
    stats->kernel_seconds += s;
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
        const float* src = v.node >= 0 ? output_of(v) : v.data;
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
    : module_(std::move(module)),
      params_(std::move(params)),
      fibers_(options.fibers),
      state_(std::make_unique<State>()) {
  ACROBAT_ASSERT(module_->plan, "the AOT engine needs a module compiled by compile_model");
  State& st = *state_;
  st.module = module_.get();
  st.plan = module_->plan.get();

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

  st.sites = codegen::number_sites(*module_);
  for (size_t p = 0; p < params_->params.size(); ++p) {
    const auto& pv = params_->params[p];
    st.param_data.push_back(pv.tensor.data.get());
    st.param_counts.push_back(pv.count);
    st.param_rows.push_back(num_elements(pv.elem_shape));
    if (pv.tensor.packed) st.packed[pv.tensor.data.get()] = pv.tensor.packed.get();
    for (size_t i = 0; i < pv.packed_rows.size(); ++i)
      st.packed[pv.tensor.data.get() + i * st.param_rows.back()] = pv.packed_rows[i].get();
  }
  // Constants are computed once, with the reference kernels, and addressed by IR site.
  st.constants.assign(st.sites.size(), nullptr);
  for (size_t i = 0; i < st.sites.size(); ++i) {
    const ir::Rhs& r = *st.sites[i];
    if (r.kind != ir::RhsKind::Op || !r.args.empty() || op_info(r.op).op_class != OpClass::Constant)
      continue;
    Tensor t = Tensor::allocate(r.type->shape);
    reference_kernel(r.op)(r.attrs, {}, t);
    st.constants[i] = t.data.get();
    st.constant_storage.push_back(std::move(t));
  }

  st.host.record = &State::record;
  st.host.alloc_obj = &State::alloc_obj;
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
  st.ctx.num_nodes = &st.num_nodes;
  st.ctx.max_call_depth = Interpreter::kMaxCallDepth;

  int threads = std::max(1, options.threads);
  if (threads > 1) st.pool = std::make_unique<ThreadPool>(threads);
  for (int t = 0; t < threads; ++t) {
    auto th = std::make_unique<KernelThread>();
    th->state = &st;
    th->ctx = st.ctx;
    th->ctx.runtime = th.get();
    st.threads.push_back(std::move(th));
  }
}

AotEngine::~AotEngine() = default;

RunResult AotEngine::run(const std::vector<Value>& inputs, const std::string& entry,
                         size_t first_instance) {
  int func = entry_function(*module_, entry);
  const ir::Function& f = module_->functions[func];
  State& st = *state_;
  RunResult result;
  RunStats& stats = result.stats;
  st.reset_run(stats);
  const auto* in_layout = st.layout_of(f.vars[f.params[0]].type);
  const auto* out_layout = st.layout_of(f.ret);
  auto start = Clock::now();
  std::vector<Val> outputs;
  outputs.reserve(inputs.size());
  if (!worker_) worker_ = std::make_unique<StackThread>();
  worker_->run([&] {
    if (fibers_ && st.plan->tensor_reads && inputs.size() > 1) {
      // One fiber and one context (its call depth) per instance.
      if (!st.fibers) st.fibers = std::make_unique<InstanceFibers>();
      std::vector<aot::AotContext> contexts(inputs.size(), st.ctx);
      outputs.resize(inputs.size());
      st.fibers->run(
          inputs.size(),
          [&](size_t i) {
            try {
              Val in = st.from_value(inputs[i], in_layout);
              contexts[i].call_depth = 0;
              outputs[i] = st.model->entry(&contexts[i], func, in);
            } catch (const UserError& e) {
              throw for_instance(e, first_instance + i);
            }
          },
          [&] { st.flush(); });
      return;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      try {
        Val in = st.from_value(inputs[i], in_layout);
        st.ctx.call_depth = 0;
        outputs.push_back(st.model->entry(&st.ctx, func, in));
      } catch (const UserError& e) {
        throw for_instance(e, first_instance + i);
      }
    }
  });
  stats.host_seconds = seconds_since(start) - st.flush_seconds;
  st.flush();
  result.outputs.reserve(outputs.size());
  for (const auto& v : outputs) result.outputs.push_back(st.to_value(v, out_layout));
  stats.instances = static_cast<int64_t>(inputs.size());
  stats.nodes = static_cast<int64_t>(st.nodes.size());
  stats.wall_seconds = seconds_since(start);
  return result;
}

}  // namespace acrobat
