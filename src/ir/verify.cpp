// The IR verifier (see verify.h).
//
// One walk per function, in program order, keeps two marks per variable: defined (met a definition
// already) and visible (that definition is in scope here). A block's bindings and a clause's
// pattern variables lose `visible` when the walk leaves the block or clause, so a use after them is
// told apart from a use before any definition. Every right-hand side met is entered in one table of
// nodes, which finds shared nodes and lets the plan's node-keyed decisions be checked against the
// module afterwards.
#include "ir/verify.h"

#include <unordered_map>

#include "support/diagnostics.h"

namespace acrobat::ir {

namespace {

// The first problem found; caught by find_ir_problem, which adds the stage.
struct Problem {
  std::string what;
};

class Verifier {
 public:
  explicit Verifier(const Module& m) : m_(m) {}

  void run() {
    for (size_t f = 0; f < m_.functions.size(); ++f) function(static_cast<int>(f));
    fn_ = nullptr;
  }
  NodeIndex take_index() { return std::move(index_); }

 private:
  // Messages are only built here, on failure: the checks themselves allocate nothing.
  [[noreturn]] void fail(const std::string& what, const Rhs* at = nullptr) const {
    std::string where = fn_ ? "function @" + fn_->name + ": " : "";
    std::string place;
    if (at)
      place = " (in " + rhs_kind_name(*at) +
              (at->span.begin.known() ? " at " + at->span.begin.str() : "") + ")";
    throw Problem{where + what + place};
  }


  // As print_module names it (an index out of range as the bare number).
  std::string var(int v) const {
    return valid_var(v) ? var_str(*fn_, v) : "variable " + std::to_string(v);
  }

  std::string func(int f) const {
    return valid_function(f) ? "@" + m_.functions[f].name : "function " + std::to_string(f);
  }

  bool valid_function(int f) const {
    return f >= 0 && static_cast<size_t>(f) < m_.functions.size();
  }

  bool valid_var(int v) const { return v >= 0 && static_cast<size_t>(v) < fn_->vars.size(); }

  void check_var_index(int v, const char* role, const Rhs* at) const {
    if (!valid_var(v))
      fail(std::string(role) + " variable " + std::to_string(v) +
               " is out of range (the function has " + std::to_string(fn_->vars.size()) +
               " variables)",
           at);
  }

  void check_function_index(int f, const char* role, const Rhs* at) const {
    if (!valid_function(f))
      fail(std::string(role) + " " + std::to_string(f) + " is out of range (the module has " +
               std::to_string(m_.functions.size()) + " functions)",
           at);
  }

  // ---- functions ----

  void function(int f) {
    fn_ = &m_.functions[f];
    const Function& fn = *fn_;
    defined_.assign(fn.vars.size(), 0);
    visible_.assign(fn.vars.size(), 0);
    origin(f);
    if (fn.num_captures < 0 || static_cast<size_t>(fn.num_captures) > fn.params.size())
      fail(std::to_string(fn.num_captures) + " captures but " + std::to_string(fn.params.size()) +
           " parameters");
    for (int p : fn.params) define(p, "a parameter", nullptr);
    if (fn.size_params.size() > fn.params.size() - static_cast<size_t>(fn.num_captures))
      fail(std::to_string(fn.size_params.size()) + " size parameters but " +
           std::to_string(fn.params.size() - static_cast<size_t>(fn.num_captures)) + " parameters");
    for (size_t i = 0; i < fn.size_params.size(); ++i) {
      const Type& t = fn.vars[fn.params[fn.declared_params() + i]].type;
      if (!is_size_var(fn.size_params[i]) || !t || t->kind != TypeKind::Int)
        fail("size parameter " + std::to_string(i) + " is not a host int holding a size variable");
    }
    block(fn.body, f);
  }

  void origin(int f) const {
    const FunctionOrigin& o = fn_->origin;
    bool derived = o.kind == FunctionOrigin::Lambda || o.kind == FunctionOrigin::Specialisation ||
                   o.kind == FunctionOrigin::Clone;
    if (derived && (!valid_function(o.from) || o.from == f))
      fail(std::string("origin ") + origin_kind_name(o.kind) + " of function " +
           std::to_string(o.from) + ", which is out of range or itself");
    if (!derived && o.from != -1)
      fail(std::string("origin ") + origin_kind_name(o.kind) + " names function " +
           std::to_string(o.from) + " (only lambdas and copies come from another function)");
  }

  void define(int v, const char* role, const Rhs* at) {
    check_var_index(v, role, at);
    if (defined_[v]) fail(var(v) + " is defined twice, the second time by " + role, at);
    defined_[v] = visible_[v] = 1;
  }

  // `at` is the node reading `a`; null for a block's result.
  void use(const Atom& a, const Rhs* at) const {
    const char* role = at ? "used" : "used as a block's result";
    if (a.kind == Atom::Func) check_function_index(a.func, "function value", at);
    if (a.kind != Atom::Var) return;
    check_var_index(a.var, role, at);
    if (!defined_[a.var]) fail(var(a.var) + " is " + role + " before its definition", at);
    if (!visible_[a.var])
      fail(var(a.var) + " is " + role + " outside the block that defines it", at);
  }

  void block(const Block& b, int f) {
    for (size_t i = 0; i < b.bindings.size(); ++i) {
      const Binding& bind = b.bindings[i];
      if (!bind.rhs) fail("the binding of " + var(bind.var) + " has no right-hand side");
      const Rhs& r = *bind.rhs;
      auto [it, fresh] = nodes_.emplace(&r, NodePlace{f, &b, i});
      if (!fresh) {
        const Function& other = m_.functions[it->second.function];
        fail("the node bound to " + var(bind.var) + " is also bound in " +
                 (&other == fn_ ? std::string("this function") : "@" + other.name) +
                 " (passes key their results by node)",
             &r);
      }
      if (r.site >= 0) {  // nodes get their sites after the pass that made them
        if (r.site >= m_.num_sites)
          fail("the node bound to " + var(bind.var) + " has site " + std::to_string(r.site) +
                   ", beyond the module's " + std::to_string(m_.num_sites),
               &r);
        auto [at, first] = sites_.emplace(r.site, &r);
        if (!first)
          fail("the node bound to " + var(bind.var) + " has site " + std::to_string(r.site) +
                   ", as another node (analyses key their results by site)",
               &r);
      }
      rhs(r, f);
      define(bind.var, "a binding", &r);
    }
    use(b.result, nullptr);
    for (const Binding& bind : b.bindings) visible_[bind.var] = 0;
    blocks_.emplace(&b, f);
  }

  void rhs(const Rhs& r, int f) {
    for (const Atom& a : r.args) use(a, &r);
    for (const SizeArg& z : r.sizes) {
      use(z.value, &r);
      const Type& t = atom_type(z.value);
      if (!is_size_var(z.dim) || (z.value.kind != Atom::Int && !(t && t->kind == TypeKind::Int)))
        fail("a size variable's value that is not a host int, or a size that is none", &r);
    }
    if (!r.sizes.empty() && r.kind != RhsKind::Op && r.kind != RhsKind::ParamGather)
      fail("sizes on a node that takes none", &r);
    auto operands = [&](size_t n) {
      if (r.args.size() != n)
        fail(std::to_string(r.args.size()) + " operands where " + std::to_string(n) + " belong",
             &r);
    };
    switch (r.kind) {
      case RhsKind::Copy: operands(1); break;
      case RhsKind::Op: {
        int arity = op_info(r.op).arity;
        if (arity >= 0)
          operands(arity);
        else if (r.args.empty())
          fail("no operands", &r);
        break;
      }
      case RhsKind::Host:
        operands(r.host_op == HostOp::Neg || r.host_op == HostOp::Not || r.host_op == HostOp::Length ||
                 r.host_op == HostOp::ToFloat || r.host_op == HostOp::ToInt || r.host_op == HostOp::FloatBits ||
                 r.host_op == HostOp::Emit
             ? 1
             : 2);
        break;
      case RhsKind::MakeTuple: break;
      case RhsKind::Call: call(r); break;
      case RhsKind::Construct:
        if (!r.ctor) fail("no constructor", &r);
        if (r.args.size() != r.ctor->fields.size())
          fail(r.ctor->name + " applied to " + std::to_string(r.args.size()) + " values; it has " +
                   std::to_string(r.ctor->fields.size()) + " fields",
               &r);
        break;
      case RhsKind::Proj: {
        operands(1);
        const Type& t = atom_type(r.args[0]);
        if (!t || t->kind != TypeKind::Tuple)
          fail("field ." + std::to_string(r.index) + " of a value of type " +
                   (t ? type_str(t) : std::string("?")) + ", not a tuple",
               &r);
        if (r.index < 0 || static_cast<size_t>(r.index) >= t->args.size())
          fail("field ." + std::to_string(r.index) + " of a tuple of " +
                   std::to_string(t->args.size()) + " fields",
               &r);
        break;
      }
      case RhsKind::ParamLoad:
      case RhsKind::ParamIndex:
      case RhsKind::ParamGather:
        operands(r.kind == RhsKind::ParamLoad ? 0 : 1);
        if (r.kind == RhsKind::ParamGather && r.sizes.size() != 1)
          fail("a gather without its length", &r);
        if (r.index < 0 || static_cast<size_t>(r.index) >= m_.params.size())
          fail("param " + std::to_string(r.index) + " is out of range (the module has " +
                   std::to_string(m_.params.size()) + " params)",
               &r);
        break;
      case RhsKind::MakeClosure: {
        check_function_index(r.callee_func, "lifted function", &r);
        const Function& lambda = m_.functions[r.callee_func];
        if (r.args.size() != static_cast<size_t>(lambda.num_captures))
          fail("closure of @" + lambda.name + " with " + std::to_string(r.args.size()) +
                   " captured values; it takes " + std::to_string(lambda.num_captures),
               &r);
        break;
      }
      case RhsKind::If: {
        operands(1);
        const Atom& c = r.args[0];
        const Type& t = atom_type(c);
        if (c.kind != Atom::Bool && !(t && t->kind == TypeKind::Bool))
          fail("the condition is not a bool", &r);
        block(r.then_block, f);
        block(r.else_block, f);
        break;
      }
      case RhsKind::Match:
        operands(1);
        for (const Clause& c : r.clauses) {
          if (!c.pattern) fail("a clause without a pattern", &r);
          std::vector<int> bound;
          pattern(*c.pattern, bound, r);
          block(c.body, f);
          for (int v : bound) visible_[v] = 0;
        }
        break;
    }
  }

  void call(const Rhs& r) const {
    size_t expected = 0;
    if (r.callee_func >= 0) {
      check_function_index(r.callee_func, "callee", &r);
      expected = m_.functions[r.callee_func].params.size();
    } else if (r.callee.kind == Atom::Func) {
      use(r.callee, &r);
      const Function& g = m_.functions[r.callee.func];
      expected = g.params.size() - g.num_captures;
    } else if (r.callee.kind == Atom::Var) {
      use(r.callee, &r);
      const Type& t = fn_->vars[r.callee.var].type;
      if (!t || t->kind != TypeKind::Func) return;  // the checker typed it; nothing to count
      expected = t->args.size();
    } else {
      fail("a call with neither a callee function nor a callee value", &r);
    }
    if (r.args.size() == expected) return;
    std::string callee = r.callee_func >= 0            ? func(r.callee_func)
                         : r.callee.kind == Atom::Func ? "the function value " + func(r.callee.func)
                                                       : var(r.callee.var);
    fail("call of " + callee + " with " + std::to_string(r.args.size()) + " arguments; it takes " +
             std::to_string(expected),
         &r);
  }

  void pattern(const Pattern& p, std::vector<int>& bound, const Rhs& match) {
    switch (p.kind) {
      case Pattern::Wildcard: return;
      case Pattern::Bind:
        define(p.var, "a pattern", &match);
        bound.push_back(p.var);
        return;
      case Pattern::Ctor:
        if (!p.ctor) fail("a constructor pattern without a constructor", &match);
        if (p.subs.size() != p.ctor->fields.size())
          fail("pattern " + p.ctor->name + " with " + std::to_string(p.subs.size()) +
                   " fields; the constructor has " + std::to_string(p.ctor->fields.size()),
               &match);
        break;
      case Pattern::Tuple: break;
    }
    for (const PatternPtr& sub : p.subs) {
      if (!sub) fail("a pattern without a sub-pattern", &match);
      pattern(*sub, bound, match);
    }
  }

  const Type& atom_type(const Atom& a) const {
    static const Type none;
    return a.kind == Atom::Var ? fn_->vars[a.var].type : none;
  }

  const Module& m_;
  const Function* fn_ = nullptr;
  std::vector<char> defined_, visible_;  // per variable of fn_
  NodeIndex index_;                      // every node and block met so far
  std::unordered_map<const Rhs*, NodePlace>& nodes_ = index_.nodes;
  std::unordered_map<int, const Rhs*>& sites_ = index_.sites;
  std::unordered_map<const Block*, int>& blocks_ = index_.blocks;
};

}  // namespace

std::string rhs_kind_name(const Rhs& r) {
  switch (r.kind) {
    case RhsKind::Copy: return "a copy";
    case RhsKind::Op: return "an operator";
    case RhsKind::Host: return "a host operation";
    case RhsKind::Call: return "a call";
    case RhsKind::Construct: return "a constructor";
    case RhsKind::MakeTuple: return "a tuple";
    case RhsKind::Proj: return "a projection";
    case RhsKind::ParamLoad: return "a param load";
    case RhsKind::ParamIndex: return "a param index";
    case RhsKind::ParamGather: return "a param gather";
    case RhsKind::MakeClosure: return "a closure";
    case RhsKind::If: return "an if";
    case RhsKind::Match: return "a match";
  }
  return "a node";
}

std::string find_ir_problem(const Module& module, const std::string& stage, NodeIndex* index) {
  Verifier v(module);
  try {
    v.run();
  } catch (const Problem& p) {
    return "IR verifier: after stage '" + stage + "', " + p.what;
  }
  if (index) *index = v.take_index();
  return "";
}

void verify_module(const Module& module, const std::string& stage) {
  std::string problem = find_ir_problem(module, stage);
  if (!problem.empty()) internal_error(__FILE__, __LINE__, problem);
}

}  // namespace acrobat::ir
