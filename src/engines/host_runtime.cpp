#include "engines/host_runtime.h"

#include <cstring>

#include "analysis/plan.h"
#include "ir/walk.h"
#include "ir/host_ops.h"
#include "engines/interpreter.h"
#include "ops/ops.h"
#include "runtime/reference_kernels.h"

namespace acrobat {

using aot::Obj;
using aot::Val;

Obj* ObjectArena::alloc(int32_t tag, int32_t size) {
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

// A type as the conversions need it, built once per type: data types point back into the graph
// (a Tree's fields are Trees), so a conversion never substitutes type parameters per value.
struct HostRuntime::Layout {
  TypeKind kind;
  const AdtDef* adt = nullptr;
  std::vector<const Layout*> elems;                // tuple elements
  std::vector<std::vector<const Layout*>> fields;  // data type: per constructor
  std::vector<int64_t> shape;                      // tensor
};

HostRuntime::HostRuntime(const ir::Module& module, const ParamStore& params, Graph& graph,
                         InstanceDriver& driver)
    : module_(module), graph_(graph), driver_(driver) {
  sites_ = ir::nodes_by_site(module);
  for (const auto& pv : params.params) {
    param_data_.push_back(pv.tensor.data.get());
    param_counts_.push_back(pv.count);
    param_rows_.push_back(num_elements(pv.elem_shape));
  }
  // Constants are computed once, with the reference kernels, and addressed by IR site.
  constants_.assign(sites_.size(), nullptr);
  for (size_t i = 0; i < sites_.size(); ++i) {
    if (!sites_[i]) continue;
    const ir::Rhs& r = *sites_[i];
    if (r.kind != ir::RhsKind::Op || !r.args.empty() || op_info(r.op).op_class != OpClass::Constant ||
        !r.sizes.empty())  // zeros(n, D): computed per instance, in its block
      continue;
    Tensor t = constant_value(r);
    constants_[i] = t.data.get();
    constant_storage_.push_back(std::move(t));
  }
  host_.record = &HostRuntime::record;
  host_.alloc_obj = &HostRuntime::alloc_obj;
  host_.concurrently = &HostRuntime::concurrently;
  host_.read_tensor = &HostRuntime::read_tensor;
  host_.fail = &HostRuntime::fail;
  host_.dup = &HostRuntime::dup;
  host_.drop = &HostRuntime::drop;
  host_.gather = &HostRuntime::gather;
  host_.emit = &HostRuntime::emit;
  ctx_.host = &host_;
  ctx_.runtime = this;
  ctx_.params = param_data_.data();
  ctx_.param_counts = param_counts_.data();
  ctx_.param_row_sizes = param_rows_.data();
  ctx_.constants = constants_.data();
  ctx_.num_nodes = graph.num_nodes();
  ctx_.max_call_depth = Interpreter::kMaxCallDepth;
}

HostRuntime::~HostRuntime() = default;

void HostRuntime::begin_run(int func, const std::vector<Value>& inputs, RunStats& stats, int64_t max_steps) {
  const ir::Function& fn = module_.functions[func];
  objects_.reset();
  gathered_.reset();
  stats_ = &stats;
  entry_ = &fn;
  func_ = fn.made_by >= 0 ? fn.made_by : func;
  in_layout_ = layout_of(fn.vars[fn.params[0]].type);
  out_layout_ = layout_of(fn.ret);
  out_dims_ = fn.size_params;
  if (fn.made_by >= 0) {
    const auto& made = module_.functions[fn.made_by].made_sizes;
    out_dims_.insert(out_dims_.end(), made.begin(), made.end());
  }
  max_steps_ = max_steps;
  inputs_.clear();
  in_vals_.clear();
  joined_.clear();
  contexts_.clear();
  steps_.clear();
  outputs_.clear();
  waiting_.clear();
  entry_sizes_.clear();
  for (const Value& input : inputs) add_instance(&input);
}

size_t HostRuntime::join(const Value& input) {
  joined_.push_back(input);
  return add_instance(&joined_.back());
}

size_t HostRuntime::add_instance(const Value* input) {
  inputs_.push_back(input);
  contexts_.push_back(ctx_);
  steps_.push_back(0);
  contexts_.back().steps = &steps_.back();
  contexts_.back().max_steps = max_steps_;
  contexts_.back().instance = static_cast<int64_t>(inputs_.size() - 1);
  outputs_.push_back(Val{});
  waiting_.push_back(-1);
  entry_sizes_.resize(entry_sizes_.size() + entry_->size_params.size(), 0);
  return inputs_.size() - 1;
}

void HostRuntime::run_instance(size_t i) {
  const ir::Function& fn = module_.functions[func_];
  const size_t S = fn.size_params.size();
  std::vector<Val> args(1 + S);
  // The instances not converted yet (the run's, or the ones that joined) are converted together
  // when the first of them starts: their misses overlap.
  if (i >= in_vals_.size()) {
    const size_t first = in_vals_.size();
    in_vals_.resize(inputs_.size());
    from_values(&inputs_[first], inputs_.size() - first, in_layout_, &in_vals_[first]);
  }
  args[0] = in_vals_[i];
  if (S > 0) {
    std::vector<Value> full = entry_arguments(module_, func_, *inputs_[i]);
    for (size_t z = 0; z < S; ++z) {
      entry_sizes_[i * S + z] = full[1 + z].i;
      args[1 + z].i = full[1 + z].i;
      args[1 + z].node = -1;
    }
  }
  outputs_[i] = enter(&contexts_[i], func_, args.data());
}

Value HostRuntime::output(size_t i) {
  const size_t S = entry_->size_params.size();
  if (entry_->made_by < 0) return to_value(outputs_[i], out_layout_, entry_sizes_.data() + i * S);
  // (result, sizes it makes): the shapes take the parameters' sizes and these.
  std::vector<int64_t> sizes(entry_sizes_.begin() + static_cast<ptrdiff_t>(i * S),
                             entry_sizes_.begin() + static_cast<ptrdiff_t>((i + 1) * S));
  const aot::Obj* both = outputs_[i].p;
  for (size_t k = S; k < out_dims_.size(); ++k) sizes.push_back(both->fields[1 + k - S].i);
  return to_value(both->fields[0], out_layout_, sizes.data());
}

bool HostRuntime::demand_output(size_t i) {
  bool pending = false;
  for_each_lazy(output_val(i), out_layout_, [&](const Val& t) {
    if (!graph_.pending(t.node)) return;
    graph_.demand(t.node);
    pending = true;
  });
  return pending;
}

void HostRuntime::release_output(size_t i) {
  for_each_lazy(output_val(i), out_layout_, [&](const Val& t) { graph_.drop(t); });
  outputs_[i] = Val{};
}

// ---- services ----

int32_t HostRuntime::record(aot::AotContext* ctx, int32_t block, const Val* args) {
  return of(ctx).graph_.record(block, args, ctx->instance);
}

Obj* HostRuntime::alloc_obj(aot::AotContext* ctx, int32_t tag, int32_t size) {
  return of(ctx).objects_.alloc(tag, size);
}

const float* HostRuntime::read_tensor(aot::AotContext* ctx, Val v) {
  HostRuntime& rt = of(ctx);
  if (v.node >= 0) {
    int32_t& waiting = rt.waiting_[static_cast<size_t>(ctx->instance)];
    waiting = v.node;
    rt.driver_.wait_for(rt.graph_, v.node);
    waiting = -1;
  }
  rt.stats_->kernel_calls++;
  rt.stats_->tensor_ops++;
  return rt.graph_.data(v);
}

void HostRuntime::dup(aot::AotContext* ctx, Val v) { of(ctx).graph_.dup(v); }

const float* HostRuntime::gather(aot::AotContext* ctx, int32_t site, Val list, int64_t length) {
  HostRuntime& rt = of(ctx);
  const ir::Rhs& r = *rt.sites_[site];
  if (length == 0) rt.fail(ctx, site, 0, -1);  // no entry: the list is empty
  const int64_t row = rt.param_rows_[r.index], count = rt.param_counts_[r.index];
  float* out = rt.gathered_.alloc(static_cast<size_t>(length * row));
  const bool keep = rt.graph_.keeps_values();  // a training run: the rows' sources for the backward
  if (keep) rt.gather_sources_.clear();
  int64_t k = 0;
  for (const aot::Obj* o = list.p; o->size != 0; o = o->fields[1].p, ++k) {
    const int64_t i = o->fields[0].i;
    if (i < 0 || i >= count) rt.fail(ctx, site, i, k);
    const float* src = rt.param_data_[r.index] + i * row;
    std::memcpy(out + k * row, src, static_cast<size_t>(row) * sizeof(float));
    if (keep) rt.gather_sources_.push_back(src);
  }
  if (keep) rt.graph_.gathered(out, row, rt.gather_sources_);
  return out;
}
void HostRuntime::drop(aot::AotContext* ctx, Val v) { of(ctx).graph_.drop(v); }

void HostRuntime::emit(aot::AotContext* ctx, int32_t site, Val v) {
  HostRuntime& rt = of(ctx);
  if (!rt.on_emit) return;
  const TypeKind kind = rt.sites_[site]->type->kind;
  rt.on_emit(static_cast<size_t>(ctx->instance), kind == TypeKind::Int     ? Value::of_int(v.i)
                                                  : kind == TypeKind::Float ? Value::of_float(v.f)
                                                                            : Value::of_bool(v.i != 0));
}

// Each member gets a copy of the context: its own call depth.
void HostRuntime::concurrently(aot::AotContext* ctx, int32_t n, aot::MemberFn const* members,
                               void* const* envs) {
  aot::AotContext few[4];
  std::vector<aot::AotContext> many;
  aot::AotContext* contexts = few;
  if (static_cast<size_t>(n) > std::size(few)) {
    many.resize(static_cast<size_t>(n));
    contexts = many.data();
  }
  for (int32_t k = 0; k < n; ++k) contexts[k] = *ctx;
  of(ctx).driver_.concurrently(static_cast<size_t>(n),
                               [&](size_t k) { members[k](&contexts[k], envs[k]); });
}

void HostRuntime::fail(aot::AotContext* ctx, int32_t site, int64_t a, int64_t b) {
  HostRuntime& rt = of(ctx);
  ACROBAT_ASSERT(site >= 0 && static_cast<size_t>(site) < rt.sites_.size() && rt.sites_[site],
                 "host program error site");
  const ir::Rhs& r = *rt.sites_[site];
  switch (r.kind) {
    case ir::RhsKind::ParamGather:
      if (b < 0) throw UserError(r.span.begin, gather_empty_message(rt.module_.params[r.index].name));
      throw UserError(r.span.begin, gather_index_message(rt.module_.params[r.index].name, a, b,
                                                         rt.param_counts_[r.index]));
    case ir::RhsKind::ParamIndex:
      throw UserError(r.span.begin, "index " + std::to_string(a) + " is out of range for param '" +
                                        rt.module_.params[r.index].name + "' of " +
                                        std::to_string(rt.param_counts_[r.index]) + " entries");
    case ir::RhsKind::Host:
      throw UserError(r.span.begin, int_error_message(static_cast<IntError>(a)));
    case ir::RhsKind::Match:
      throw UserError(r.span.begin,
                      "no match clause matches the value (the match is not exhaustive for "
                      "nested patterns)");
    case ir::RhsKind::Op: {
      // A ranked argmax of a ragged tensor with `a` entries, its one size `b` (shape_Argmax): the
      // shape rule's message on those, as the reference engine gives it on the instance's shape.
      ACROBAT_ASSERT(r.op == OpId::Argmax && r.sizes.size() == 1, "a host read fails only as a ranked argmax");
      static const std::vector<std::string> none;
      SizeNamesScope names(rt.module_.plan ? rt.module_.plan->size_names : none);
      const std::vector<std::vector<int64_t>> shape{{a}};
      throw UserError(r.span.begin, instance_shape_error(r.op, shape, r.attrs,
                                                         dim_str(r.sizes[0].dim) + " = " + std::to_string(b)));
    }
    case ir::RhsKind::Call:
      ACROBAT_ASSERT(a >= 0, "a closure of an unknown function");
      if (b == 1) throw UserError(r.span.begin, step_budget_message(ctx->max_steps, rt.module_.functions[a].name));
      throw UserError(r.span.begin, "recursion deeper than " +
                                        std::to_string(Interpreter::kMaxCallDepth) + " calls (in '" +
                                        rt.module_.functions[a].name + "')");
    default: break;
  }
  ACROBAT_ASSERT(false, "host program error at an unexpected site");
  __builtin_unreachable();
}

// ---- values in and out ----

const HostRuntime::Layout* HostRuntime::layout_of(const Type& t) {
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
      for (const auto& f : c->fields)
        fs.push_back(layout_of(substitute_params(f, t->adt->type_params, t->args)));
      l->fields.push_back(std::move(fs));
    }
  if (t->kind != TypeKind::Int && t->kind != TypeKind::Float && t->kind != TypeKind::Bool &&
      t->kind != TypeKind::Tensor && t->kind != TypeKind::Tuple && t->kind != TypeKind::Adt)
    throw UserError("a batched engine cannot pass a value of type " + type_str(t) +
                    " in or out of the model");
  return l;
}

void HostRuntime::from_values(const Value* const* values, size_t n, const Layout* l, Val* out) {
  // Breadth first over one worklist for all of them, no recursion however deep a value (a long
  // list, a deep tree). The inputs are cold (built before the run), and a value (in its parent's
  // fields), its aggregate and the aggregate's fields are three dependent misses: the items a few
  // places ahead, mostly of other instances, are fetched meanwhile, their values first (both ends:
  // an int and the aggregate pointer may lie on two lines), then their aggregates, then their
  // fields, so the misses overlap. (The distances: on the Intel Xeon host of docs/benchmarks.md,
  // converting 2210 SST trees took 7.8 ms at 8 and 4 items, 5.6 ms at 32 and 16 and at 64 and 32;
  // 2.0 ms when the trees were warm. Fetching the values too took the H 64 Tree-LSTM's host+graph
  // on the 8544 training trees from 0.070-0.072 to 0.059-0.061 s; 72, 48 and 24 items as 48, 32
  // and 16.)
  constexpr size_t kValueAhead = 48, kAggregateAhead = 32, kFieldsAhead = 16;
  std::vector<ValueItem>& items = value_items_;
  items.clear();
  for (size_t k = 0; k < n; ++k) items.push_back({values[k], l, &out[k]});
  for (size_t i = 0; i < items.size(); ++i) {
    if (i + kValueAhead < items.size()) {
      __builtin_prefetch(items[i + kValueAhead].value);
      __builtin_prefetch(&items[i + kValueAhead].value->agg);
    }
    if (i + kAggregateAhead < items.size())
      if (const Aggregate* a = items[i + kAggregateAhead].value->agg.get()) __builtin_prefetch(a);
    if (i + kFieldsAhead < items.size())
      if (const Aggregate* a = items[i + kFieldsAhead].value->agg.get()) __builtin_prefetch(a->fields.data());
    const ValueItem it = items[i];
    Val& slot = *it.slot;
    slot = Val{};
    slot.node = -1;
    switch (it.layout->kind) {
      case TypeKind::Int: slot.i = it.value->i; break;
      case TypeKind::Float: slot.f = it.value->f; break;
      case TypeKind::Bool: slot.i = it.value->b ? 1 : 0; break;
      case TypeKind::Tensor: slot.data = it.value->tensor->data.get(); break;
      case TypeKind::Tuple: {
        const auto& elems = it.layout->elems;
        if (elems.empty()) break;
        Obj* o = objects_.alloc(0, static_cast<int32_t>(elems.size()));
        slot.p = o;
        for (size_t e = 0; e < elems.size(); ++e) items.push_back({&it.value->agg->fields[e], elems[e], &o->fields[e]});
        break;
      }
      default: {  // a data type
        const Aggregate& agg = *it.value->agg;
        const auto& fields = it.layout->fields[agg.ctor->tag];
        Obj* o = objects_.alloc(agg.ctor->tag, static_cast<int32_t>(fields.size()));
        slot.p = o;
        for (size_t e = 0; e < fields.size(); ++e) items.push_back({&agg.fields[e], fields[e], &o->fields[e]});
        break;
      }
    }
  }
}

template <class F>
void HostRuntime::for_each_lazy(const Val& v, const Layout* l, F&& f) {
  switch (l->kind) {
    case TypeKind::Tensor:
      if (v.node >= 0) f(v);
      return;
    case TypeKind::Tuple:
      for (size_t i = 0; i < l->elems.size(); ++i) for_each_lazy(v.p->fields[i], l->elems[i], f);
      return;
    case TypeKind::Adt:
      // The spine of a list-like value by a loop, as to_value.
      for (const Obj* o = v.p; o;) {
        const auto& types = l->fields[o->tag];
        const bool chained = !types.empty() && types.back() == l;
        for (size_t i = 0; i + (chained ? 1 : 0) < types.size(); ++i) for_each_lazy(o->fields[i], types[i], f);
        o = chained ? o->fields[types.size() - 1].p : nullptr;
      }
      return;
    default: return;
  }
}

Value HostRuntime::to_value(const Val& v, const Layout* l, const int64_t* sizes) {
  switch (l->kind) {
    case TypeKind::Int: return Value::of_int(v.i);
    case TypeKind::Float: return Value::of_float(v.f);
    case TypeKind::Bool: return Value::of_bool(v.i != 0);
    case TypeKind::Tensor: {
      Tensor out = Tensor::allocate(is_ragged(l->shape) ? bind_sizes(l->shape, out_dims_.data(), sizes,
                                                                    out_dims_.size(), &module_.size_sums)
                                                        : l->shape);
      std::memcpy(out.data.get(), graph_.data(v), out.size() * sizeof(float));
      return Value::of_tensor(std::move(out));
    }
    case TypeKind::Tuple: {
      if (l->elems.empty()) return Value::unit();
      std::vector<Value> fields;
      for (size_t i = 0; i < l->elems.size(); ++i) fields.push_back(to_value(v.p->fields[i], l->elems[i], sizes));
      return Value::tuple(std::move(fields));
    }
    default: {  // a data type; the spine of a list-like value (a last field of the same type) by a loop
      std::vector<const Obj*> spine;
      for (const Obj* o = v.p;; o = o->fields[l->fields[o->tag].size() - 1].p) {
        spine.push_back(o);
        const auto& types = l->fields[o->tag];
        if (types.empty() || types.back() != l) break;
      }
      Value next;
      for (size_t k = spine.size(); k-- > 0;) {
        const Obj* o = spine[k];
        const auto& types = l->fields[o->tag];
        const bool chained = k + 1 < spine.size();
        std::vector<Value> fields;
        for (size_t i = 0; i + (chained ? 1 : 0) < types.size(); ++i) fields.push_back(to_value(o->fields[i], types[i], sizes));
        if (chained) fields.push_back(std::move(next));
        next = Value::adt(l->adt->ctors[o->tag].get(), std::move(fields));
      }
      return next;
    }
  }
}

}  // namespace acrobat
