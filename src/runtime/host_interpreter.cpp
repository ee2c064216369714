#include "runtime/host_interpreter.h"

#include <alloca.h>

#include "acrobat/kernels.h"
#include "analysis/plan.h"
#include "ir/walk.h"

namespace acrobat {

using aot::AotContext;
using aot::Obj;
using aot::Val;

namespace {

Val I(int64_t x) {
  Val v{};
  v.i = x;
  v.node = -1;
  return v;
}
Val F(double x) {
  Val v{};
  v.f = x;
  v.node = -1;
  return v;
}
Val T(const float* d) {
  Val v{};
  v.data = d;
  v.node = -1;
  return v;
}
Val P(Obj* p) {
  Val v{};
  v.p = p;
  v.node = -1;
  return v;
}

// Storage for `n` Vals of the current function's frame on the machine stack.
#define ACROBAT_STACK_VALS(n) static_cast<Val*>(alloca(sizeof(Val) * std::max<size_t>((n), 1)))

}  // namespace

HostInterpreter::HostInterpreter(const ir::Module& module) : m_(module) {
  flags_.assign(static_cast<size_t>(module.num_sites), 0);
  read_sizes_.assign(static_cast<size_t>(module.num_sites), 0);
  const analysis::DepthPlan& depth = module.plan->depth;
  for (int s : depth.phase_ends) flags_[s] |= kEndsPhase;
  for (const auto& [s, pads] : depth.ghosts)
    for (int p : pads)
      if (p > 0) flags_[s] |= kGhosts;
  const analysis::Plan& plan = *module.plan;
  for (const ir::Function& f : module.functions)
    ir::for_each_block(f.body, [&](const ir::Block& b) {
      for (const auto& bind : b.bindings) {
        const ir::Rhs& r = *bind.rhs;
        if (plan.block_at_site[r.site] >= 0) flags_[r.site] |= kBlockStart;
        if (plan.concurrency.group_at(r) > 0) flags_[r.site] |= kGroupStart;
        if (analysis::is_batched_op(r))
          flags_[r.site] |= kBatchedOp;
        else if (analysis::is_tensor_op(r))
          flags_[r.site] |= kConstant;
        if (r.kind == ir::RhsKind::Op && op_info(r.op).op_class == OpClass::HostRead)
          read_sizes_[r.site] = num_elements(f.vars[r.args[0].var].type->shape);
        if (r.kind != ir::RhsKind::Host) continue;
        const ir::Atom& a = r.args[0];
        TypeKind k = a.kind == ir::Atom::Var   ? f.vars[a.var].type->kind
                     : a.kind == ir::Atom::Int  ? TypeKind::Int
                     : a.kind == ir::Atom::Bool ? TypeKind::Bool
                                                : TypeKind::Float;
        if (k == TypeKind::Int) flags_[r.site] |= kIntArgs;
        if (k == TypeKind::Bool) flags_[r.site] |= kBoolArgs;
      }
    });
}

Val HostInterpreter::call(AotContext* ctx, int32_t func, Val input) {
  const ir::Function& f = m_.functions[func];
  Val* frame = ACROBAT_STACK_VALS(f.vars.size());
  frame[f.params[0]] = input;
  return invoke(ctx, func, frame);
}

Val HostInterpreter::invoke(AotContext* ctx, int32_t func, Val* frame) {
  ++ctx->call_depth;
  Val result = block(ctx, m_.functions[func].body, frame);
  --ctx->call_depth;
  return result;
}

Val HostInterpreter::atom(AotContext* ctx, const ir::Atom& a, const Val* frame) const {
  switch (a.kind) {
    case ir::Atom::Var: return frame[a.var];
    case ir::Atom::Int: return I(a.int_value);
    case ir::Atom::Float: return F(a.float_value);
    case ir::Atom::Bool: return I(a.bool_value ? 1 : 0);
    case ir::Atom::Unit: return Val{};
    case ir::Atom::Func: return P(ctx->host->alloc_obj(ctx, a.func, 0));
  }
  return Val{};
}

Val HostInterpreter::block(AotContext* ctx, const ir::Block& b, Val* frame) {
  for (size_t i = 0; i < b.bindings.size();) {
    const ir::Rhs& r = *b.bindings[i].rhs;
    const uint8_t flags = flags_[r.site];
    if (flags & kBlockStart) {
      i = record(ctx, b, i, frame);
    } else if (flags & kGroupStart) {
      i = concurrent(ctx, b, i, static_cast<size_t>(m_.plan->concurrency.group_at(r)), frame);
    } else {
      binding(ctx, b.bindings[i], frame);
      ++i;
    }
  }
  return atom(ctx, b.result, frame);
}

// One static block execution: its host bindings, lazy handles for its operators, the record.
size_t HostInterpreter::record(AotContext* ctx, const ir::Block& b, size_t begin, Val* frame) {
  const analysis::StaticBlock& s = *m_.plan->block_at(*b.bindings[begin].rhs);
  const int32_t node = *ctx->num_nodes;
  int32_t k = 0;
  for (size_t j = s.begin; j < s.end; ++j) {
    const ir::Binding& bind = b.bindings[j];
    const ir::Rhs& r = *bind.rhs;
    const uint8_t flags = flags_[r.site];
    if (flags & kBatchedOp)
      frame[bind.var] = aot::lazy_val(node, k++);
    else if (flags & kConstant)
      frame[bind.var] = T(ctx->constants[r.site]);
    else
      binding(ctx, bind, frame);
  }
  if (!s.ops.empty()) {
    Val* args = ACROBAT_STACK_VALS(s.args.size());
    for (size_t a = 0; a < s.args.size(); ++a) args[a] = frame[s.args[a].var];
    ctx->host->record(ctx, s.id, args);
  }
  return s.end;
}

// A member of a group of concurrent calls: one binding, with the member's own context.
struct HostInterpreter::Member {
  HostInterpreter* self;
  const ir::Binding* bind;
  Val* frame;  // the function's, shared: members define distinct variables
};

void HostInterpreter::run_member(AotContext* ctx, void* env) {
  auto* m = static_cast<Member*>(env);
  m->self->binding(ctx, *m->bind, m->frame);
}

size_t HostInterpreter::concurrent(AotContext* ctx, const ir::Block& b, size_t begin, size_t n,
                                   Val* frame) {
  // Groups are small: their records live on this stack frame.
  Member* members = static_cast<Member*>(alloca(sizeof(Member) * n));
  auto* fns = static_cast<aot::MemberFn*>(alloca(sizeof(aot::MemberFn) * n));
  auto* envs = static_cast<void**>(alloca(sizeof(void*) * n));
  for (size_t k = 0; k < n; ++k) {
    members[k] = Member{this, &b.bindings[begin + k], frame};
    fns[k] = &HostInterpreter::run_member;
    envs[k] = &members[k];
  }
  ctx->host->concurrently(ctx, static_cast<int32_t>(n), fns, envs);
  return begin + n;
}

void HostInterpreter::binding(AotContext* ctx, const ir::Binding& bind, Val* frame) {
  const ir::Rhs& r = *bind.rhs;
  Val& v = frame[bind.var];
  switch (r.kind) {
    case ir::RhsKind::Copy: v = atom(ctx, r.args[0], frame); return;
    case ir::RhsKind::Op: {  // a tensor-to-host read (tensor operators are in static blocks)
      const float* t = ctx->host->read_tensor(ctx, frame[r.args[0].var]);
      v = r.type->kind == TypeKind::Int ? I(kernels::argmax(t, read_sizes_[r.site])) : F(t[0]);
      return;
    }
    case ir::RhsKind::Host: v = host_op(ctx, r, frame); return;
    case ir::RhsKind::Call: v = call_binding(ctx, r, frame); return;
    case ir::RhsKind::Construct:
    case ir::RhsKind::MakeTuple:
    case ir::RhsKind::MakeClosure: {
      const int32_t tag = r.kind == ir::RhsKind::Construct ? r.ctor->tag
                          : r.kind == ir::RhsKind::MakeTuple ? 0
                                                             : r.callee_func;
      Obj* o = ctx->host->alloc_obj(ctx, tag, static_cast<int32_t>(r.args.size()));
      for (size_t i = 0; i < r.args.size(); ++i) o->fields[i] = atom(ctx, r.args[i], frame);
      v = P(o);
      return;
    }
    case ir::RhsKind::Proj: v = atom(ctx, r.args[0], frame).p->fields[r.index]; return;
    case ir::RhsKind::ParamLoad: v = T(ctx->params[r.index]); return;
    case ir::RhsKind::ParamIndex: {
      const int64_t i = atom(ctx, r.args[0], frame).i;
      if (i < 0 || i >= ctx->param_counts[r.index]) ctx->host->fail(ctx, r.site, i, 0);
      v = T(ctx->params[r.index] + i * ctx->param_row_sizes[r.index]);
      return;
    }
    case ir::RhsKind::If: {
      const size_t branch = atom(ctx, r.args[0], frame).i ? 0 : 1;
      Val result = block(ctx, branch == 0 ? r.then_block : r.else_block, frame);
      if (flags_[r.site] & kGhosts) adjust(ctx, result, r.type, m_.plan->depth.ghost(r, branch));
      v = result;
      return;
    }
    case ir::RhsKind::Match: {
      const Val scrutinee = atom(ctx, r.args[0], frame);
      for (size_t c = 0; c < r.clauses.size(); ++c) {
        const ir::Pattern& p = *r.clauses[c].pattern;
        if (!matches(p, scrutinee)) continue;
        bind_pattern(p, scrutinee, frame);
        Val result = block(ctx, r.clauses[c].body, frame);
        if (flags_[r.site] & kGhosts) adjust(ctx, result, r.type, m_.plan->depth.ghost(r, c));
        v = result;
        return;
      }
      ctx->host->fail(ctx, r.site, 0, 0);
      return;
    }
  }
}

// A call: the callee's frame is made here, on this function's stack frame, with its parameters
// (a closure's captured values first) set from the arguments.
Val HostInterpreter::call_binding(AotContext* ctx, const ir::Rhs& r, Val* frame) {
  int32_t callee = r.callee_func;
  const Obj* closure = nullptr;
  if (callee < 0) {
    closure = atom(ctx, r.callee, frame).p;
    callee = closure->tag;
  }
  if (ctx->call_depth >= ctx->max_call_depth) ctx->host->fail(ctx, r.site, callee, 0);
  const ir::Function& f = m_.functions[callee];
  Val* callee_frame = ACROBAT_STACK_VALS(f.vars.size());
  size_t p = 0;
  if (closure)
    for (; p < static_cast<size_t>(f.num_captures); ++p) callee_frame[f.params[p]] = closure->fields[p];
  for (const ir::Atom& a : r.args) callee_frame[f.params[p++]] = atom(ctx, a, frame);
  Val result = invoke(ctx, callee, callee_frame);
  if (flags_[r.site] & kEndsPhase) adjust(ctx, result, r.type, -1);
  return result;
}

Val HostInterpreter::host_op(AotContext* ctx, const ir::Rhs& r, const Val* frame) const {
  const Val a = atom(ctx, r.args[0], frame);
  const uint8_t flags = flags_[r.site];
  const bool is_int = flags & kIntArgs, is_bool = flags & kBoolArgs;
  if (r.host_op == ir::HostOp::Not) return I(!a.i);
  if (r.host_op == ir::HostOp::Neg)
    return is_int ? I(static_cast<int64_t>(0 - static_cast<uint64_t>(a.i))) : F(-a.f);
  const Val b = atom(ctx, r.args[1], frame);
  if (is_int || is_bool) {
    const int64_t x = a.i, y = b.i;
    switch (r.host_op) {
      case ir::HostOp::Lt: return I(x < y);
      case ir::HostOp::Le: return I(x <= y);
      case ir::HostOp::Gt: return I(x > y);
      case ir::HostOp::Ge: return I(x >= y);
      case ir::HostOp::Eq: return I(x == y);
      case ir::HostOp::Ne: return I(x != y);
      // Wrapping arithmetic, as the generated code does.
      case ir::HostOp::Add: return I(static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)));
      case ir::HostOp::Sub: return I(static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)));
      case ir::HostOp::Mul: return I(static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)));
      case ir::HostOp::Div:
      case ir::HostOp::Mod:
        if (y == 0) ctx->host->fail(ctx, r.site, 0, 0);
        if (x == INT64_MIN && y == -1) ctx->host->fail(ctx, r.site, 1, 0);
        return I(r.host_op == ir::HostOp::Div ? x / y : x % y);
      default: break;
    }
  } else {
    const double x = a.f, y = b.f;
    switch (r.host_op) {
      case ir::HostOp::Lt: return I(x < y);
      case ir::HostOp::Le: return I(x <= y);
      case ir::HostOp::Gt: return I(x > y);
      case ir::HostOp::Ge: return I(x >= y);
      case ir::HostOp::Eq: return I(x == y);
      case ir::HostOp::Ne: return I(x != y);
      case ir::HostOp::Add: return F(x + y);
      case ir::HostOp::Sub: return F(x - y);
      case ir::HostOp::Mul: return F(x * y);
      case ir::HostOp::Div: return F(x / y);
      default: break;
    }
  }
  ACROBAT_ASSERT(false, "host operator");
  return Val{};
}

bool HostInterpreter::matches(const ir::Pattern& p, Val v) {
  switch (p.kind) {
    case ir::Pattern::Wildcard:
    case ir::Pattern::Bind: return true;
    case ir::Pattern::Ctor:
      if (v.p->tag != p.ctor->tag) return false;
      [[fallthrough]];
    case ir::Pattern::Tuple:
      for (size_t i = 0; i < p.subs.size(); ++i)
        if (!matches(*p.subs[i], v.p->fields[i])) return false;
      return true;
  }
  return false;
}

void HostInterpreter::bind_pattern(const ir::Pattern& p, Val v, Val* frame) {
  if (p.kind == ir::Pattern::Bind) frame[p.var] = v;
  for (size_t i = 0; i < p.subs.size(); ++i) bind_pattern(*p.subs[i], v.p->fields[i], frame);
}

namespace {
bool holds_tensor(const Type& t) {
  if (t->kind == TypeKind::Tensor) return true;
  if (t->kind != TypeKind::Tuple) return false;
  for (const auto& a : t->args)
    if (holds_tensor(a)) return true;
  return false;
}
}  // namespace

void HostInterpreter::adjust(AotContext* ctx, Val& v, const Type& type, int pad) {
  if (!type || pad == 0) return;
  if (type->kind == TypeKind::Tensor) {
    if (pad > 0)
      aot::add_ghost_levels(v, pad);
    else
      aot::end_phase(v);
    return;
  }
  if (type->kind != TypeKind::Tuple || !holds_tensor(type)) return;
  Obj* copy = ctx->host->alloc_obj(ctx, 0, static_cast<int32_t>(type->args.size()));
  for (size_t i = 0; i < type->args.size(); ++i) {
    copy->fields[i] = v.p->fields[i];
    adjust(ctx, copy->fields[i], type->args[i], pad);
  }
  v = P(copy);
}

}  // namespace acrobat
