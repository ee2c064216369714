#include "engines/host_interpreter.h"

#include <alloca.h>

#include <bit>

#include "acrobat/kernels.h"
#include "kernels/vec_math.h"
#include "analysis/plan.h"
#include "ir/host_ops.h"
#include "ir/match.h"

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

bool holds_tensor(const Type& t) {
  if (t->kind == TypeKind::Tensor) return true;
  if (t->kind != TypeKind::Tuple) return false;
  for (const auto& a : t->args)
    if (holds_tensor(a)) return true;
  return false;
}

// Storage for `n` values of type T on the current function's stack frame.
#define ACROBAT_STACK_ARRAY(T, n) static_cast<T*>(alloca(sizeof(T) * std::max<size_t>((n), 1)))

}  // namespace

// ---- translation ----

HostInterpreter::HostInterpreter(const ir::Module& module)
    : m_(module), own_(module.plan->ownership.enabled ? &module.plan->ownership : nullptr) {
  for (size_t fi = 0; fi < module.functions.size(); ++fi) {
    const ir::Function& f = module.functions[fi];
    Function out;
    out.num_vars = f.vars.size();
    out.num_captures = f.num_captures;
    out.params = f.params;
    for (int32_t c = 0; c < f.num_captures; ++c)
      out.dup_capture.push_back(own_ && own_->tracked[fi][f.params[c]] ? 1 : 0);
    out.body = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
    functions_.push_back(std::move(out));
    compile_block(f, f.body, functions_.back().body, own_ ? &own_->bodies[fi] : nullptr);
  }
}

HostInterpreter::Operand HostInterpreter::operand(const ir::Atom& a) {
  Val v{};
  switch (a.kind) {
    case ir::Atom::Var: return a.var;
    case ir::Atom::Int: v = I(a.int_value); break;
    case ir::Atom::Float: v = F(a.float_value); break;
    case ir::Atom::Bool: v = I(a.bool_value ? 1 : 0); break;
    case ir::Atom::Unit: v = I(0); break;
    // A closure without captures: immutable, so one object serves every use.
    case ir::Atom::Func: v = P(function_values_.alloc(a.func, 0)); break;
  }
  pool_.push_back(v);
  return -static_cast<Operand>(pool_.size());
}

uint16_t HostInterpreter::flags_of(const ir::Function& f, const ir::Rhs& r) const {
  const analysis::Plan& plan = *m_.plan;
  uint16_t flags = 0;
  if (plan.is_tail_call(r)) flags |= kTail;
  if (plan.block_at_site[r.site] >= 0) flags |= kBlockStart;
  if (plan.concurrency.group_at(r) > 0) flags |= kGroupStart;
  if (analysis::is_batched_op(r))
    flags |= kBatchedOp;
  else if (analysis::is_tensor_op(r))
    flags |= kConstant;
  if (plan.depth.ends_phase(r)) flags |= kEndsPhase;
  if (own_ && (!own_->dups[r.site].empty() || !own_->drops[r.site].empty())) flags |= kOwns;
  if (auto it = plan.depth.ghosts.find(r.site); it != plan.depth.ghosts.end())
    for (int pad : it->second)
      if (pad > 0) flags |= kGhosts;
  if (r.kind == ir::RhsKind::Host) {
    const ir::Atom& a = r.args[0];
    TypeKind k = a.kind == ir::Atom::Var   ? f.vars[a.var].type->kind
                 : a.kind == ir::Atom::Int  ? TypeKind::Int
                 : a.kind == ir::Atom::Bool ? TypeKind::Bool
                                            : TypeKind::Float;
    if (k == TypeKind::Int) flags |= kIntArgs;
    if (k == TypeKind::Bool) flags |= kBoolArgs;
  }
  return flags;
}

void HostInterpreter::compile_block(const ir::Function& f, const ir::Block& b, int32_t id,
                                    const analysis::BlockOwnership* own) {
  const analysis::Plan& plan = *m_.plan;
  const auto begin = static_cast<int32_t>(code_.size());
  code_.resize(code_.size() + b.bindings.size());
  for (size_t i = 0; i < b.bindings.size(); ++i) {
    const ir::Rhs& r = *b.bindings[i].rhs;
    Instr in;
    in.kind = r.kind;
    in.flags = flags_of(f, r);
    in.var = b.bindings[i].var;
    in.site = r.site;
    in.rhs = &r;
    in.num_args = static_cast<uint16_t>(r.args.size());
    ACROBAT_ASSERT(r.args.size() <= UINT16_MAX, "too many operands");
    in.args = static_cast<int32_t>(operands_.size());
    for (const ir::Atom& a : r.args) operands_.push_back(operand(a));
    if (in.flags & kBlockStart) in.extra = plan.block_at_site[r.site];
    if (in.flags & kGroupStart) in.extra = plan.concurrency.group_at(r);
    switch (r.kind) {
      case ir::RhsKind::Call:
        in.x = r.callee_func;
        if (r.callee_func < 0) in.y = operand(r.callee);
        break;
      case ir::RhsKind::Construct: in.x = r.ctor->tag; break;
      case ir::RhsKind::MakeTuple: in.x = 0; break;
      case ir::RhsKind::MakeClosure: in.x = r.callee_func; break;
      case ir::RhsKind::Proj:
      case ir::RhsKind::ParamLoad:
      case ir::RhsKind::ParamIndex: in.x = r.index; break;
      case ir::RhsKind::ParamGather:
        in.x = r.index;
        operands_.push_back(operand(r.sizes[0].value));  // args[1]: the length
        break;
      case ir::RhsKind::Host: in.x = static_cast<int32_t>(r.host_op); break;
      case ir::RhsKind::If:
        in.y = static_cast<int32_t>(blocks_.size());
        blocks_.resize(blocks_.size() + 2);
        compile_block(f, r.then_block, in.y, own_ ? &own_->branch(r, 0) : nullptr);
        compile_block(f, r.else_block, in.y + 1, own_ ? &own_->branch(r, 1) : nullptr);
        break;
      case ir::RhsKind::Match: {
        in.x = static_cast<int32_t>(r.clauses.size());
        in.y = static_cast<int32_t>(clauses_.size());
        clauses_.resize(clauses_.size() + r.clauses.size());
        for (size_t c = 0; c < r.clauses.size(); ++c) {
          const auto body = static_cast<int32_t>(blocks_.size());
          blocks_.emplace_back();
          const auto pat = static_cast<int32_t>(pats_.size());
          pats_.emplace_back();
          compile_pattern(*r.clauses[c].pattern, pat);
          clauses_[in.y + c] = Clause{pat, body};
          compile_block(f, r.clauses[c].body, body, own_ ? &own_->branch(r, c) : nullptr);
        }
        break;
      }
      case ir::RhsKind::Op: {  // a tensor-to-host read: the elements it reads
        if (op_info(r.op).op_class != OpClass::HostRead) break;
        if (!r.sizes.empty()) {
          // Its size or seed differ per instance: their values follow the operands (read()).
          for (const ir::SizeArg& z : r.sizes) operands_.push_back(operand(z.value));
          in.x = -1;
          in.y = static_cast<int32_t>(read_shapes_.size());
          read_shapes_.push_back(f.vars[r.args[0].var].type->shape);
          break;
        }
        const int64_t n = num_elements(f.vars[r.args[0].var].type->shape);
        ACROBAT_ASSERT(n <= INT32_MAX, "a tensor read of more than 2^31 elements");
        in.x = static_cast<int32_t>(n);
        break;
      }
      case ir::RhsKind::Copy: break;
    }
    code_[begin + i] = in;
  }
  blocks_[id] = CodeBlock{begin, begin + static_cast<int32_t>(b.bindings.size()), operand(b.result),
                          own ? own->drops : analysis::VarList{}, own && own->dup_result};
}

void HostInterpreter::compile_pattern(const ir::Pattern& p, int32_t at) {
  Pat out;
  out.kind = p.kind;
  if (p.kind == ir::Pattern::Ctor) out.tag = p.ctor->tag;
  if (p.kind == ir::Pattern::Bind) out.var = p.var;
  out.first = static_cast<int32_t>(pats_.size());
  out.count = static_cast<int32_t>(p.subs.size());
  pats_.resize(pats_.size() + p.subs.size());
  for (size_t i = 0; i < p.subs.size(); ++i) compile_pattern(*p.subs[i], out.first + static_cast<int32_t>(i));
  pats_[at] = out;
}

// ---- execution ----

Val HostInterpreter::call(AotContext* ctx, int32_t func, const Val* args) {
  const Function& f = functions_[func];
  Val* frame = ACROBAT_STACK_ARRAY(Val, f.num_vars);
  for (size_t p = 0; p < f.params.size(); ++p) frame[f.params[p]] = args[p];
  return invoke(ctx, func, frame);
}

Val HostInterpreter::invoke(AotContext* ctx, int32_t func, Val* frame) {
  ++ctx->call_depth;
  const Function& f = functions_[func];
  Val result = run_block(ctx, f.body, frame);
  while (tail_pending_) {
    tail_pending_ = false;
    for (size_t p = 0; p < f.params.size(); ++p) frame[f.params[p]] = tail_args_[p];
    result = run_block(ctx, f.body, frame);
  }
  --ctx->call_depth;
  return result;
}

// After a tail call has been requested nothing more runs until the loop in invoke(), as the
// generated code jumps: no drops, no dups.
Val HostInterpreter::run_block(AotContext* ctx, int32_t block, Val* frame) {
  const CodeBlock b = blocks_[block];
  if (!b.drops.empty()) drop_vars(ctx, b.drops, frame);
  for (int32_t i = b.begin; i < b.end;) {
    const Instr& in = code_[i];
    if (in.flags & kBlockStart) {
      i = record(ctx, i, frame);
    } else if (in.flags & kGroupStart) {
      i = concurrent(ctx, i, frame);
    } else if (in.flags & kOwns) {
      dup_vars(ctx, own_->dups[in.site], frame);
      run(ctx, in, frame);
      if (!tail_pending_) drop_vars(ctx, own_->drops[in.site], frame);
      ++i;
    } else {
      run(ctx, in, frame);
      ++i;
    }
  }
  const Val result = value(b.result, frame);
  if (b.dup_result && !tail_pending_) aot::dup_ref(ctx, result);
  return result;
}

void HostInterpreter::dup_vars(AotContext* ctx, analysis::VarList l, const Val* frame) const {
  for (const int32_t* v = own_->begin(l); v != own_->end(l); ++v) aot::dup_ref(ctx, frame[*v]);
}

void HostInterpreter::drop_vars(AotContext* ctx, analysis::VarList l, const Val* frame) const {
  for (const int32_t* v = own_->begin(l); v != own_->end(l); ++v) aot::drop_ref(ctx, frame[*v]);
}

// One static block execution: its host bindings, lazy handles for its operators, the record.
int32_t HostInterpreter::record(AotContext* ctx, int32_t at, Val* frame) {
  const analysis::StaticBlock& s = m_.plan->blocks[code_[at].extra];
  const int32_t node = *ctx->num_nodes;
  int32_t k = 0;
  const auto end = at + static_cast<int32_t>(s.end - s.begin);
  for (int32_t i = at; i < end; ++i) {
    const Instr& in = code_[i];
    if (in.flags & kBatchedOp)
      frame[in.var] = aot::lazy_val(node, k++);
    else if (in.flags & kConstant)
      frame[in.var] = T(ctx->constants[in.site]);
    else
      run(ctx, in, frame);
  }
  if (!s.ops.empty()) {
    // The block's tensors, then the values of its size variables.
    Val* args = ACROBAT_STACK_ARRAY(Val, s.args.size() + s.size_vars.size());
    for (size_t a = 0; a < s.args.size(); ++a) args[a] = frame[s.args[a].var];
    for (size_t z = 0; z < s.size_vars.size(); ++z) args[s.args.size() + z] = frame[s.size_vars[z]];
    ctx->host->record(ctx, s.id, args);
  }
  if (code_[at].flags & kOwns) {
    dup_vars(ctx, own_->dups[code_[at].site], frame);
    drop_vars(ctx, own_->drops[code_[at].site], frame);
  }
  return end;
}

// A member of a group of concurrent calls: one instruction, with the member's own context.
struct HostInterpreter::Member {
  HostInterpreter* self;
  const Instr* instr;
  Val* frame;  // the function's, shared: members define distinct variables
};

void HostInterpreter::run_member(AotContext* ctx, void* env) {
  auto* m = static_cast<Member*>(env);
  if (m->instr->flags & kOwns) m->self->dup_vars(ctx, m->self->own_->dups[m->instr->site], m->frame);
  m->self->run(ctx, *m->instr, m->frame);
}

int32_t HostInterpreter::concurrent(AotContext* ctx, int32_t at, Val* frame) {
  const auto n = static_cast<size_t>(code_[at].extra);
  // Groups are small: their records live on this stack frame.
  Member* members = ACROBAT_STACK_ARRAY(Member, n);
  aot::MemberFn* fns = ACROBAT_STACK_ARRAY(aot::MemberFn, n);
  void** envs = ACROBAT_STACK_ARRAY(void*, n);
  for (size_t k = 0; k < n; ++k) {
    members[k] = Member{this, &code_[at + k], frame};
    fns[k] = &HostInterpreter::run_member;
    envs[k] = &members[k];
  }
  ctx->host->concurrently(ctx, static_cast<int32_t>(n), fns, envs);
  if (code_[at].flags & kOwns) drop_vars(ctx, own_->drops[code_[at].site], frame);
  return at + static_cast<int32_t>(n);
}

Val HostInterpreter::read(AotContext* ctx, const Instr& in, Val* frame) const {
  const Operand* args = operands_.data() + in.args;
  const ir::Rhs& r = *in.rhs;
  const float* t = ctx->host->read_tensor(ctx, value(args[0], frame));
  int64_t n = in.x;
  OpAttrs attrs = r.attrs;
  if (in.x < 0) {
    int64_t dims[8], values[8];
    ACROBAT_ASSERT(r.sizes.size() <= std::size(dims), "a tensor read with more than 8 sizes");
    for (size_t i = 0; i < r.sizes.size(); ++i) {
      dims[i] = r.sizes[i].dim;
      values[i] = value(args[in.num_args + i], frame).i;
    }
    n = 1;
    for (int64_t d : read_shapes_[static_cast<size_t>(in.y)]) n *= size_value(d, dims, values, r.sizes.size());
    attrs = bind_attr_sizes(r.attrs, dims, values, r.sizes.size());
  }
  switch (r.op) {
    case OpId::Argmax:
      if (attrs.ints[0] == 0) return I(kernels::argmax(t, n));
      // A ragged tensor's count only the instance tells; the one size's value for the message.
      if (n <= attrs.ints[0]) ctx->host->fail(ctx, in.site, n, in.x < 0 ? value(args[in.num_args], frame).i : 0);
      return I(kernels::ranked_argmax(t, n, attrs.ints[0]));
    case OpId::Sample: return I(kernels::sample_scalar(t, n, attrs.ints[0]));
    default: return F(t[0]);
  }
}

void HostInterpreter::run(AotContext* ctx, const Instr& in, Val* frame) {
  const Operand* args = operands_.data() + in.args;
  Val& v = frame[in.var];
  switch (in.kind) {
    case ir::RhsKind::Copy: v = value(args[0], frame); return;
    case ir::RhsKind::Op: v = read(ctx, in, frame); return;  // (tensor operators are in static blocks)
    case ir::RhsKind::Host: v = host_op(ctx, in, frame); return;
    case ir::RhsKind::Call: v = call_instr(ctx, in, frame); return;
    case ir::RhsKind::Construct:
    case ir::RhsKind::MakeTuple:
    case ir::RhsKind::MakeClosure: {
      Obj* o = ctx->host->alloc_obj(ctx, in.x, in.num_args);
      for (int i = 0; i < in.num_args; ++i) o->fields[i] = value(args[i], frame);
      v = P(o);
      return;
    }
    case ir::RhsKind::Proj: v = value(args[0], frame).p->fields[in.x]; return;
    case ir::RhsKind::ParamLoad: v = T(ctx->params[in.x]); return;
    case ir::RhsKind::ParamIndex: {
      const int64_t i = value(args[0], frame).i;
      if (i < 0 || i >= ctx->param_counts[in.x]) ctx->host->fail(ctx, in.site, i, 0);
      v = T(ctx->params[in.x] + i * ctx->param_row_sizes[in.x]);
      return;
    }
    case ir::RhsKind::ParamGather:
      v = T(ctx->host->gather(ctx, in.site, value(args[0], frame), value(args[1], frame).i));
      return;
    case ir::RhsKind::If: {
      const int branch = value(args[0], frame).i ? 0 : 1;
      Val result = run_block(ctx, in.y + branch, frame);
      if (in.flags & kGhosts) adjust(ctx, result, in.rhs->type, m_.plan->depth.ghost(*in.rhs, branch));
      v = result;
      return;
    }
    case ir::RhsKind::Match: {
      const Val scrutinee = value(args[0], frame);
      for (int32_t c = 0; c < in.x; ++c) {
        const Clause& clause = clauses_[in.y + c];
        if (!match(clause.pattern, scrutinee, frame)) continue;
        Val result = run_block(ctx, clause.block, frame);
        if (in.flags & kGhosts) adjust(ctx, result, in.rhs->type, m_.plan->depth.ghost(*in.rhs, c));
        v = result;
        return;
      }
      ctx->host->fail(ctx, in.site, 0, 0);
      return;
    }
  }
}

// A call: the callee's frame is made here, on this function's stack frame, with its parameters
// (a closure's captured values first) set from the arguments.
Val HostInterpreter::call_instr(AotContext* ctx, const Instr& in, Val* frame) {
  if (in.flags & kTail) {  // the function's last act: its arguments go to the loop in invoke()
    aot::count_step(ctx, in.site, in.x);  // first: a failure leaves no tail call pending
    const Operand* args = operands_.data() + in.args;
    tail_args_.resize(in.num_args);
    for (int i = 0; i < in.num_args; ++i) tail_args_[i] = value(args[i], frame);
    tail_pending_ = true;
    return I(0);
  }
  int32_t callee = in.x;
  const Obj* closure = nullptr;
  if (callee < 0) {
    closure = value(in.y, frame).p;
    callee = closure->tag;
  }
  if (ctx->call_depth >= ctx->max_call_depth) ctx->host->fail(ctx, in.site, callee, 0);
  aot::count_step(ctx, in.site, callee);
  const Function& f = functions_[callee];
  Val* callee_frame = ACROBAT_STACK_ARRAY(Val, f.num_vars);
  size_t p = 0;
  if (closure)  // the callee owns its parameters: the captured values the closure keeps are handed over
    for (; p < static_cast<size_t>(f.num_captures); ++p) {
      callee_frame[f.params[p]] = closure->fields[p];
      if (f.dup_capture[p]) aot::dup_ref(ctx, closure->fields[p]);
    }
  const Operand* args = operands_.data() + in.args;
  for (int i = 0; i < in.num_args; ++i) callee_frame[f.params[p++]] = value(args[i], frame);
  Val result = invoke(ctx, callee, callee_frame);
  if (in.flags & kEndsPhase) adjust(ctx, result, in.rhs->type, -1);
  return result;
}

Val HostInterpreter::host_op(AotContext* ctx, const Instr& in, const Val* frame) const {
  const Operand* args = operands_.data() + in.args;
  const auto op = static_cast<ir::HostOp>(in.x);
  const Val a = value(args[0], frame);
  const bool is_int = in.flags & kIntArgs, is_bool = in.flags & kBoolArgs;
  if (op == ir::HostOp::Not) return I(!a.i);
  if (op == ir::HostOp::ToFloat) return F(static_cast<double>(a.i));
  if (op == ir::HostOp::Emit) {
    ctx->host->emit(ctx, in.site, a);
    return a;
  }
  if (op == ir::HostOp::FloatBits) return I(std::bit_cast<int64_t>(a.f));
  if (op == ir::HostOp::ToInt) {
    int64_t out = 0;
    if (!float_to_int(a.f, out)) ctx->host->fail(ctx, in.site, static_cast<int64_t>(IntError::Conversion), 0);
    return I(out);
  }
  if (op == ir::HostOp::Length) {  // Nil has no fields, Cons(head, tail) two
    int64_t n = 0;
    for (const Obj* o = a.p; o->size != 0; o = o->fields[1].p) ++n;
    return I(n);
  }
  if (op == ir::HostOp::Neg) {
    if (!is_int) return F(-a.f);
    if (a.i == INT64_MIN) ctx->host->fail(ctx, in.site, static_cast<int64_t>(IntError::Overflow), 0);
    return I(-a.i);
  }
  const Val b = value(args[1], frame);
  if (is_int || is_bool) {
    const int64_t x = a.i, y = b.i;
    if (auto c = host_compare(op, x, y)) return I(*c);
    int64_t out = 0;
    if (auto e = int_arith(op, x, y, out)) ctx->host->fail(ctx, in.site, static_cast<int64_t>(*e), 0);
    return I(out);
  } else {
    const double x = a.f, y = b.f;
    if (auto c = host_compare(op, x, y)) return I(*c);
    switch (op) {
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

bool HostInterpreter::match(int32_t p, Val v, Val* frame) const {
  struct Ops {
    const std::vector<Pat>& pats;
    Val* frame;
    ir::Pattern::Kind kind(const Pat& q) const { return q.kind; }
    size_t arity(const Pat& q) const { return static_cast<size_t>(q.count); }
    const Pat& sub(const Pat& q, size_t i) const { return pats[static_cast<size_t>(q.first) + i]; }
    bool has_ctor(Val x, const Pat& q) const { return x.p->tag == q.tag; }
    Val field(Val x, size_t i) const { return x.p->fields[i]; }
    void bind(const Pat& q, Val x) const { frame[q.var] = x; }
  } ops{pats_, frame};
  return ir::match_pattern(pats_[p], v, ops);
}

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
