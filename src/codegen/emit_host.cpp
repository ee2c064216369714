// The host program of a generated file (emit_parts.h): one C++ function per IR function, with host
// values as aot::Val, each static block execution recorded as one dataflow-graph node, ownership
// actions, ghost operations and phase ends where the plan puts them; the dispatchers of closure
// calls, and the entry point.
#include <fmt/format.h>

#include <set>

#include "codegen/emit_parts.h"
#include "ir/host_ops.h"
#include "ir/match.h"

namespace acrobat::codegen {

using analysis::StaticBlock;

namespace {

// The test and the bindings of a match clause with pattern `p` on the value of expression `e`: the
// rule of ir/match.h walked once, each constructor test printed instead of decided.
struct PrintedMatch {
  std::string test;                // "true" when the pattern tests nothing
  std::vector<std::string> binds;  // one statement per variable, in the pattern's order
};

PrintedMatch print_match(const ir::Pattern& p, const std::string& e) {
  struct Ops {
    std::vector<std::string> tests, binds;
    ir::Pattern::Kind kind(const ir::Pattern& q) const { return q.kind; }
    size_t arity(const ir::Pattern& q) const { return q.subs.size(); }
    const ir::Pattern& sub(const ir::Pattern& q, size_t i) const { return *q.subs[i]; }
    bool has_ctor(const std::string& x, const ir::Pattern& q) {
      tests.push_back(fmt::format("{}.p->tag == {}", x, q.ctor->tag));
      return true;
    }
    std::string field(const std::string& x, size_t i) const { return fmt::format("{}.p->fields[{}]", x, i); }
    void bind(const ir::Pattern& q, const std::string& x) { binds.push_back(fmt::format("v{} = {};", q.var, x)); }
  } ops;
  ir::match_pattern(p, e, ops);
  std::string test;
  for (const std::string& t : ops.tests) test += (test.empty() ? "" : " && ") + t;
  return PrintedMatch{test.empty() ? "true" : test, std::move(ops.binds)};
}

class HostProgram {
 public:
  explicit HostProgram(const Emission& e) : m_(e.module), plan_(e.plan), own_(e.plan.ownership), w_(e.out) {
    for (size_t f = 0; f < m_.functions.size(); ++f) collect_function_values(m_.functions[f].body);
  }

  void run() {
    for (size_t f = 0; f < m_.functions.size(); ++f) w_.line(signature(static_cast<int>(f)) + ";");
    for (int arity : closure_arities()) w_.line(dispatcher_signature(arity) + ";");
    w_.blank();
    for (size_t f = 0; f < m_.functions.size(); ++f) function(static_cast<int>(f));
    for (int arity : closure_arities()) dispatcher(arity);
    entry();
  }

 private:
  void collect_function_values(const ir::Block& b) {
    auto note = [&](const ir::Atom& a) {
      if (a.kind == ir::Atom::Func) function_values_.insert(a.func);
    };
    for (const auto& bind : b.bindings) {
      const ir::Rhs& r = *bind.rhs;
      if (r.kind == ir::RhsKind::MakeClosure) function_values_.insert(r.callee_func);
      if (r.kind == ir::RhsKind::Call && r.callee_func < 0)
        indirect_arities_.insert(static_cast<int>(r.args.size()));
      for (const auto& a : r.args) note(a);
      note(r.callee);
      collect_function_values(r.then_block);
      collect_function_values(r.else_block);
      for (const auto& c : r.clauses) collect_function_values(c.body);
    }
    note(b.result);
  }

  std::set<int> closure_arities() const {
    std::set<int> out = indirect_arities_;
    for (int f : function_values_)
      out.insert(static_cast<int>(m_.functions[f].params.size()) - m_.functions[f].num_captures);
    return out;
  }

  std::string signature(int f) const {
    std::string s = fmt::format("Val f{}(AotContext* ctx", f);
    for (size_t i = 0; i < m_.functions[f].params.size(); ++i) s += fmt::format(", Val p{}", i);
    return s + ")";
  }

  static std::string dispatcher_signature(int arity) {
    std::string s = fmt::format("Val call{}(AotContext* ctx, int32_t site, Val closure", arity);
    for (int i = 0; i < arity; ++i) s += fmt::format(", Val a{}", i);
    return s + ")";
  }

  void dispatcher(int arity) {
    {
      auto body = w_.block(dispatcher_signature(arity) + " {");
      line("Obj* o = closure.p;");
      {
        auto cases = w_.block("switch (o->tag) {");
        for (int f : function_values_) {
          const ir::Function& fn = m_.functions[f];
          if (static_cast<int>(fn.params.size()) - fn.num_captures != arity) continue;
          std::string c = fmt::format("case {}:", f);
          // The callee owns its parameters: the captured values the closure keeps are handed over.
          for (int k = 0; k < fn.num_captures; ++k)
            if (tracked(f, fn.params[k])) c += fmt::format(" dup_ref(ctx, o->fields[{}]);", k);
          c += fmt::format(" return f{}(ctx", f);
          for (int k = 0; k < fn.num_captures; ++k) c += fmt::format(", o->fields[{}]", k);
          for (int i = 0; i < arity; ++i) c += fmt::format(", a{}", i);
          line(c + ");");
        }
      }
      line("ctx->host->fail(ctx, site, -1, 0);");
      line("__builtin_unreachable();");
    }
    w_.blank();
  }

  void entry() {
    {
      auto body = w_.block("Val entry(AotContext* ctx, int32_t function, const Val* args) {");
      {
        auto cases = w_.block("switch (function) {");
        for (size_t f = 0; f < m_.functions.size(); ++f) {
          const ir::Function& fn = m_.functions[f];
          if (fn.declared_params() != 1 || fn.num_captures != 0) continue;
          std::string args;
          for (size_t p = 0; p < fn.params.size(); ++p) args += fmt::format(", args[{}]", p);
          line(fmt::format("case {}: return f{}(ctx{});", f, f, args));
        }
      }
      line("ctx->host->fail(ctx, -1, function, 0);");
      line("__builtin_unreachable();");
    }
    w_.blank();
  }

  void function(int f) {
    const ir::Function& fn = m_.functions[f];
    func_ = f;
    line("// @" + fn.name);
    {
      auto body = w_.block(signature(f) + " {");
      if (!fn.vars.empty()) {
        std::string decl = "Val";
        for (size_t v = 0; v < fn.vars.size(); ++v) decl += fmt::format("{} v{}", v ? "," : "", v);
        line(decl + ";");
      }
      for (size_t i = 0; i < fn.params.size(); ++i) line(fmt::format("v{} = p{};", fn.params[i], i));
      line("++ctx->call_depth;");
      const size_t start = w_.position();
      has_tail_call_ = false;
      std::string result = block(fn.body, own_.enabled ? &own_.bodies[f] : nullptr);
      // Tail calls jump back here with the parameters set (analysis/tail_calls.h).
      if (has_tail_call_) w_.insert(start, "tail:;\n");
      line("--ctx->call_depth;");
      line("return " + result + ";");
    }
    w_.blank();
  }

  void line(std::string_view s) { w_.line(s); }

  std::string atom(const ir::Atom& a) const {
    switch (a.kind) {
      case ir::Atom::Var: return fmt::format("v{}", a.var);
      case ir::Atom::Int: return fmt::format("I(INT64_C({}))", a.int_value);
      case ir::Atom::Float: return fmt::format("F({:.17g})", a.float_value);
      case ir::Atom::Bool: return a.bool_value ? "I(1)" : "I(0)";
      case ir::Atom::Unit: return "I(0)";
      case ir::Atom::Func: return fmt::format("P(ctx->host->alloc_obj(ctx, {}, 0))", a.func);
    }
    return "Val{}";
  }

  Type atom_type(const ir::Atom& a) const {
    switch (a.kind) {
      case ir::Atom::Var: return m_.functions[func_].vars[a.var].type;
      case ir::Atom::Int: return int_type();
      case ir::Atom::Float: return float_type();
      case ir::Atom::Bool: return bool_type();
      default: return unit_type();
    }
  }

  // Emits the bindings of `b`, with its ownership actions `own` (null: none); returns the
  // expression of its result.
  std::string block(const ir::Block& b, const analysis::BlockOwnership* own) {
    if (own) refs("drop_ref", own->drops);
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Binding& bind = b.bindings[i];
      if (const StaticBlock* s = plan_.block_at(*bind.rhs)) {
        i = record(b, *s);
        continue;
      }
      if (int n = plan_.concurrency.group_at(*bind.rhs)) {
        i = concurrent(b, i, static_cast<size_t>(n));
        continue;
      }
      refs("dup_ref", dups(*bind.rhs));
      binding(bind);
      refs("drop_ref", drops(*bind.rhs));
      ++i;
    }
    if (own && own->dup_result) line(fmt::format("dup_ref(ctx, {});", atom(b.result)));
    return atom(b.result);
  }

  // ---- ownership of lazy tensors (analysis/ownership.h) ----

  bool tracked(int f, int var) const { return own_.enabled && own_.tracked[f][var]; }
  analysis::VarList dups(const ir::Rhs& r) const {
    return own_.enabled ? own_.dups[r.site] : analysis::VarList{};
  }
  analysis::VarList drops(const ir::Rhs& r) const {
    return own_.enabled ? own_.drops[r.site] : analysis::VarList{};
  }
  const analysis::BlockOwnership* branch_actions(const ir::Rhs& r, size_t branch) const {
    return own_.enabled ? &own_.branch(r, branch) : nullptr;
  }
  // One `fn(ctx, v);` per variable of `l`, on one line.
  void refs(const char* fn, analysis::VarList l) {
    if (l.empty()) return;
    std::string s;
    for (const int32_t* v = own_.begin(l); v != own_.end(l); ++v)
      s += fmt::format("{}{}(ctx, v{});", s.empty() ? "" : " ", fn, *v);
    line(s);
  }

  // A group of independent calls (analysis/concurrency.h): each member a lambda over the
  // function's variables, run by the runtime with a context of its own.
  size_t concurrent(const ir::Block& b, size_t begin, size_t n) {
    int g = groups_++;
    auto group = w_.block("{");
    std::string members, envs;
    for (size_t k = 0; k < n; ++k) {
      std::string name = fmt::format("g{}m{}", g, k);
      {
        auto member = w_.block(fmt::format("auto {} = [&](AotContext* ctx) {{", name), "};");
        refs("dup_ref", dups(*b.bindings[begin + k].rhs));
        binding(b.bindings[begin + k]);
      }
      members += fmt::format("{}run_member<decltype({})>", k ? ", " : "", name);
      envs += fmt::format("{}&{}", k ? ", " : "", name);
    }
    line(fmt::format("const MemberFn members[] = {{{}}};", members));
    line(fmt::format("void* const envs[] = {{{}}};", envs));
    line(fmt::format("ctx->host->concurrently(ctx, {}, members, envs);", n));
    refs("drop_ref", drops(*b.bindings[begin].rhs));
    return begin + n;
  }

  // One static block execution: its host bindings, lazy handles for its operators, and the record.
  size_t record(const ir::Block& b, const StaticBlock& s) {
    auto scope = w_.block("{");
    if (!s.ops.empty()) line("const int32_t node = *ctx->num_nodes;");
    int k = 0;
    for (size_t j = s.begin; j < s.end; ++j) {
      const ir::Binding& bind = b.bindings[j];
      const ir::Rhs& r = *bind.rhs;
      if (analysis::is_batched_op(r)) {
        line(fmt::format("v{} = lazy_val(node, {});", bind.var, k++));
      } else if (analysis::is_tensor_op(r)) {
        line(fmt::format("v{} = T(ctx->constants[{}]);", bind.var, r.site));
      } else {
        binding(bind);
      }
    }
    if (!s.ops.empty()) {
      // The block's tensors, then the values of its size variables.
      std::string args;
      for (const auto& a : s.args) args += fmt::format("{}v{}", args.empty() ? "" : ", ", a.var);
      for (int v : s.size_vars) args += fmt::format("{}v{}", args.empty() ? "" : ", ", v);
      line(fmt::format("const Val args[] = {{{}}};", args));
      line(fmt::format("ctx->host->record(ctx, {}, args);", s.id));
    }
    const ir::Rhs& first = *b.bindings[s.begin].rhs;
    refs("dup_ref", dups(first));
    refs("drop_ref", drops(first));
    return s.end;
  }

  void binding(const ir::Binding& bind) {
    const ir::Rhs& r = *bind.rhs;
    std::string v = fmt::format("v{}", bind.var);
    int site = r.site;
    switch (r.kind) {
      case ir::RhsKind::Copy: line(v + " = " + atom(r.args[0]) + ";"); break;
      case ir::RhsKind::Op: host_read(v, r, site); break;
      case ir::RhsKind::Host: host_op(v, r, site); break;
      case ir::RhsKind::Call: call(v, r); break;
      case ir::RhsKind::Construct:
      case ir::RhsKind::MakeTuple:
      case ir::RhsKind::MakeClosure: {
        int tag = r.kind == ir::RhsKind::Construct ? r.ctor->tag
                  : r.kind == ir::RhsKind::MakeTuple ? 0 : r.callee_func;
        auto scope = w_.block("{");
        line(fmt::format("Obj* o = ctx->host->alloc_obj(ctx, {}, {});", tag, r.args.size()));
        for (size_t i = 0; i < r.args.size(); ++i)
          line(fmt::format("o->fields[{}] = {};", i, atom(r.args[i])));
        line(v + " = P(o);");
        break;
      }
      case ir::RhsKind::Proj:
        line(fmt::format("{} = {}.p->fields[{}];", v, atom(r.args[0]), r.index));
        break;
      case ir::RhsKind::ParamLoad: line(fmt::format("{} = T(ctx->params[{}]);", v, r.index)); break;
      case ir::RhsKind::ParamIndex: {
        std::string i = atom(r.args[0]) + ".i";
        line(fmt::format("if ({0} < 0 || {0} >= ctx->param_counts[{1}]) ctx->host->fail(ctx, {2}, {0}, 0);",
                         i, r.index, site));
        line(fmt::format("{} = T(ctx->params[{}] + {} * ctx->param_row_sizes[{}]);", v, r.index, i,
                         r.index));
        break;
      }
      case ir::RhsKind::ParamGather:
        line(fmt::format("{} = T(ctx->host->gather(ctx, {}, {}, {}.i));", v, site, atom(r.args[0]),
                         atom(r.sizes[0].value)));
        break;
      case ir::RhsKind::If: {
        auto branches = w_.block(fmt::format("if ({}.i) {{", atom(r.args[0])));
        branch(v, r.then_block, branch_actions(r, 0), r.type, plan_.depth.ghost(r, 0));
        branches.next("} else {");
        branch(v, r.else_block, branch_actions(r, 1), r.type, plan_.depth.ghost(r, 1));
        break;
      }
      case ir::RhsKind::Match: match(v, r); break;
    }
  }

  void call(const std::string& v, const ir::Rhs& r) {
    if (plan_.is_tail_call(r)) {
      ACROBAT_ASSERT(drops(r).empty(), "drops after a tail call");
      const ir::Function& fn = m_.functions[func_];
      auto scope = w_.block("{");
      for (size_t i = 0; i < r.args.size(); ++i) line(fmt::format("const Val t{} = {};", i, atom(r.args[i])));
      for (size_t i = 0; i < r.args.size(); ++i) line(fmt::format("v{} = t{};", fn.params[i], i));
      line(fmt::format("count_step(ctx, {}, {});", r.site, r.callee_func));
      line("goto tail;");
      has_tail_call_ = true;
      return;
    }
    std::string callee = r.callee_func >= 0 ? std::to_string(r.callee_func) : atom(r.callee) + ".p->tag";
    line(fmt::format("if (ctx->call_depth >= ctx->max_call_depth) ctx->host->fail(ctx, {}, {}, 0);",
                     r.site, callee));
    line(fmt::format("count_step(ctx, {}, {});", r.site, callee));
    std::string args;
    for (const auto& a : r.args) args += ", " + atom(a);
    if (r.callee_func >= 0)
      line(fmt::format("{} = f{}(ctx{});", v, r.callee_func, args));
    else
      line(fmt::format("{} = call{}(ctx, {}, {}{});", v, r.args.size(), r.site, atom(r.callee), args));
    if (plan_.depth.ends_phase(r)) adjust(v, r.type, -1);
  }

  // The clauses in order, each a test of the scrutinee and its bindings (ir/match.h), then a user
  // error when none matches.
  void match(const std::string& v, const ir::Rhs& r) {
    const std::string scrutinee = atom(r.args[0]);
    std::vector<PrintedMatch> clauses;
    for (const ir::Clause& c : r.clauses) clauses.push_back(print_match(*c.pattern, scrutinee));
    auto chain = w_.block(fmt::format("if ({}) {{", clauses[0].test));
    for (size_t c = 0; c < r.clauses.size(); ++c) {
      if (c) chain.next(fmt::format("}} else if ({}) {{", clauses[c].test));
      for (const std::string& b : clauses[c].binds) line(b);
      branch(v, r.clauses[c].body, branch_actions(r, c), r.type, plan_.depth.ghost(r, c));
    }
    chain.next("} else {");
    line(fmt::format("ctx->host->fail(ctx, {}, 0, 0);", r.site));
  }

  // A branch's body, in the block its caller opened: `v` gets its result.
  void branch(const std::string& v, const ir::Block& body, const analysis::BlockOwnership* own,
              const Type& type, int ghost) {
    std::string result = block(body, own);
    line(v + " = " + result + ";");
    if (ghost > 0) adjust(v, type, ghost);
  }

  // Ghost levels (pad > 0) or a phase end (pad < 0) for every tensor a value of `type` holds
  // directly or in tuples (tuples are copied, not changed).
  void adjust(const std::string& v, const Type& type, int pad) {
    if (!type) return;
    if (type->kind == TypeKind::Tensor) {
      if (pad > 0)
        line(fmt::format("add_ghost_levels({}, {});", v, pad));
      else
        line(fmt::format("end_phase({});", v));
      return;
    }
    if (type->kind != TypeKind::Tuple || type->args.empty() || !holds_tensor(type)) return;
    auto scope = w_.block("{");
    int depth = adjust_depth_++;
    std::string o = fmt::format("t{}", depth);
    line(fmt::format("Obj* {} = ctx->host->alloc_obj(ctx, 0, {});", o, type->args.size()));
    for (size_t i = 0; i < type->args.size(); ++i) {
      std::string field = fmt::format("{}->fields[{}]", o, i);
      line(fmt::format("{} = {}.p->fields[{}];", field, v, i));
      adjust(field, type->args[i], pad);
    }
    line(fmt::format("{} = P({});", v, o));
    --adjust_depth_;
  }

  static bool holds_tensor(const Type& t) {
    if (!t) return false;
    if (t->kind == TypeKind::Tensor) return true;
    if (t->kind != TypeKind::Tuple) return false;
    for (const auto& a : t->args)
      if (holds_tensor(a)) return true;
    return false;
  }

  void host_read(const std::string& v, const ir::Rhs& r, int site) {
    // The value of size `d` (a constant, or a size variable the read's SizeArgs give).
    auto size = [&](int64_t d) -> std::string {
      if (!is_size_var(d)) return fmt::format("INT64_C({})", d);
      for (const ir::SizeArg& z : r.sizes)
        if (z.dim == d) return atom(z.value) + ".i";
      ACROBAT_ASSERT(false, "a tensor read's size without a value");
      return "";
    };
    std::string n;
    for (int64_t d : atom_type(r.args[0])->shape) n += (n.empty() ? "" : " * ") + size(d);
    if (n.empty()) n = "INT64_C(1)";
    auto scope = w_.block("{");
    line(fmt::format("const float* t = ctx->host->read_tensor(ctx, {});", atom(r.args[0])));
    if (r.op == OpId::Argmax) {
      if (r.attrs.ints[0] == 0) {
        line(fmt::format("{} = I(acrobat::kernels::argmax_scalar(t, {}));", v, n));
      } else {
        // A ragged tensor's count only the instance tells (shape_Argmax): fail with it and its size.
        if (!r.sizes.empty())
          line(fmt::format("if ({} <= INT64_C({})) ctx->host->fail(ctx, {}, {}, {});", n, r.attrs.ints[0], site, n,
                           size(r.sizes[0].dim)));
        line(fmt::format("{} = I(acrobat::kernels::ranked_argmax(t, {}, INT64_C({})));", v, n, r.attrs.ints[0]));
      }
    } else if (r.op == OpId::Sample) {
      const std::string seed = r.attrs.is_size(0) ? size(r.attrs.ints[0]) : fmt::format("INT64_C({})", r.attrs.ints[0]);
      line(fmt::format("{} = I(acrobat::kernels::sample_scalar(t, {}, {}));", v, n, seed));
    } else {
      line(v + " = F(t[0]);");
    }
  }

  static constexpr int64_t kOverflow = static_cast<int64_t>(IntError::Overflow);

  void host_op(const std::string& v, const ir::Rhs& r, int site) {
    Type t = atom_type(r.args[0]);
    std::string a = atom(r.args[0]);
    if (r.host_op == ir::HostOp::Not) return line(fmt::format("{} = I(!{}.i);", v, a));
    if (r.host_op == ir::HostOp::ToFloat) return line(fmt::format("{} = F(static_cast<double>({}.i));", v, a));
    if (r.host_op == ir::HostOp::Emit) return line(fmt::format("ctx->host->emit(ctx, {}, {}); {} = {};", site, a, v, a));
    if (r.host_op == ir::HostOp::FloatBits) return line(fmt::format("{} = I(__builtin_bit_cast(int64_t, {}.f));", v, a));
    if (r.host_op == ir::HostOp::ToInt) {
      // float_to_int's rule (ir/host_ops.h), which generated code does not include.
      line(fmt::format("if (!({0}.f >= -0x1p63 && {0}.f < 0x1p63)) ctx->host->fail(ctx, {1}, {2}, 0);", a, site,
                       static_cast<int64_t>(IntError::Conversion)));
      line(fmt::format("{} = I(static_cast<int64_t>({}.f));", v, a));
      return;
    }
    if (r.host_op == ir::HostOp::Length)  // Nil has no fields, Cons(head, tail) two
      return line(fmt::format("{{ int64_t n = 0; for (const Obj* o = {}.p; o->size != 0; o = o->fields[1].p) ++n; {} = I(n); }}",
                              a, v));
    bool is_int = t->kind == TypeKind::Int, is_bool = t->kind == TypeKind::Bool;
    if (r.host_op == ir::HostOp::Neg) {
      if (!is_int) return line(fmt::format("{} = F(-{}.f);", v, a));
      line(fmt::format("if ({}.i == INT64_MIN) ctx->host->fail(ctx, {}, {}, 0);", a, site, kOverflow));
      return line(fmt::format("{} = I(-{}.i);", v, a));
    }
    std::string b = atom(r.args[1]);
    const char* field = (is_int || is_bool) ? "i" : "f";
    auto cmp = [&](const char* op) {
      line(fmt::format("{} = I({}.{} {} {}.{});", v, a, field, op, b, field));
    };
    switch (r.host_op) {
      case ir::HostOp::Lt: return cmp("<");
      case ir::HostOp::Le: return cmp("<=");
      case ir::HostOp::Gt: return cmp(">");
      case ir::HostOp::Ge: return cmp(">=");
      case ir::HostOp::Eq: return cmp("==");
      case ir::HostOp::Ne: return cmp("!=");
      default: break;
    }
    const char* op = r.host_op == ir::HostOp::Add   ? "+"
                     : r.host_op == ir::HostOp::Sub ? "-"
                     : r.host_op == ir::HostOp::Mul ? "*"
                     : r.host_op == ir::HostOp::Div ? "/"
                                                    : "%";
    if (!is_int) return line(fmt::format("{} = F({}.f {} {}.f);", v, a, op, b));
    if (r.host_op == ir::HostOp::Div || r.host_op == ir::HostOp::Mod) {
      line(fmt::format("if ({}.i == 0) ctx->host->fail(ctx, {}, {}, 0);", b, site,
                       static_cast<int64_t>(IntError::DivisionByZero)));
      line(fmt::format("if ({}.i == INT64_MIN && {}.i == -1) ctx->host->fail(ctx, {}, {}, 0);", a, b, site,
                       static_cast<int64_t>(IntError::DivisionOverflow)));
      return line(fmt::format("{} = I({}.i {} {}.i);", v, a, op, b));
    }
    const char* builtin = r.host_op == ir::HostOp::Add   ? "__builtin_add_overflow"
                          : r.host_op == ir::HostOp::Sub ? "__builtin_sub_overflow"
                                                         : "__builtin_mul_overflow";
    line(fmt::format("if ({}({}.i, {}.i, &{}.i)) ctx->host->fail(ctx, {}, {}, 0);", builtin, a, b, v, site,
                     kOverflow));
    line(fmt::format("{}.node = -1;", v));
  }

  const ir::Module& m_;
  const analysis::Plan& plan_;
  const analysis::OwnershipPlan& own_;
  std::set<int> function_values_;
  std::set<int> indirect_arities_;
  Writer& w_;
  int func_ = 0;
  int adjust_depth_ = 0;
  int groups_ = 0;  // groups of concurrent calls emitted so far (their lambdas' names)
  bool has_tail_call_ = false;  // in the function being emitted
};

}  // namespace

void emit_host_program(const Emission& e) { HostProgram(e).run(); }

}  // namespace acrobat::codegen
