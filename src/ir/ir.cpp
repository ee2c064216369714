#include "ir/ir.h"

#include <sstream>

#include "lang/ast.h"

namespace acrobat::ir {

const char* host_op_name(HostOp op) {
  switch (op) {
    case HostOp::Add: return "add";
    case HostOp::Sub: return "sub";
    case HostOp::Mul: return "mul";
    case HostOp::Div: return "div";
    case HostOp::Mod: return "mod";
    case HostOp::Neg: return "neg";
    case HostOp::Not: return "not";
    case HostOp::Lt: return "lt";
    case HostOp::Le: return "le";
    case HostOp::Gt: return "gt";
    case HostOp::Ge: return "ge";
    case HostOp::Eq: return "eq";
    case HostOp::Ne: return "ne";
    case HostOp::Length: return "length";
    case HostOp::ToFloat: return "to_float";
    case HostOp::Emit: return "emit";
    case HostOp::ToInt: return "to_int";
    case HostOp::FloatBits: return "float_bits";
  }
  return "?";
}

const char* origin_kind_name(FunctionOrigin::Kind kind) {
  switch (kind) {
    case FunctionOrigin::User: return "user";
    case FunctionOrigin::Prelude: return "prelude";
    case FunctionOrigin::Lambda: return "lambda";
    case FunctionOrigin::Specialisation: return "specialisation";
    case FunctionOrigin::Clone: return "clone";
  }
  return "?";
}

namespace {
std::shared_ptr<Rhs> node(RhsKind kind, Type t, Span s) {
  auto r = std::make_shared<Rhs>();
  r->kind = kind;
  r->type = std::move(t);
  r->span = std::move(s);
  return r;
}
}  // namespace

RhsPtr make_copy(Atom a, Type t, Span s) {
  auto r = node(RhsKind::Copy, std::move(t), std::move(s));
  r->args = {a};
  return r;
}
RhsPtr make_op(OpId op, std::vector<Atom> args, OpAttrs attrs, Type t, Span s) {
  auto r = node(RhsKind::Op, std::move(t), std::move(s));
  r->op = op;
  r->args = std::move(args);
  r->attrs = std::move(attrs);
  return r;
}
RhsPtr make_host(HostOp op, std::vector<Atom> args, Type t, Span s) {
  auto r = node(RhsKind::Host, std::move(t), std::move(s));
  r->host_op = op;
  r->args = std::move(args);
  return r;
}
RhsPtr make_call(int func, std::vector<Atom> args, Type t, Span s) {
  auto r = node(RhsKind::Call, std::move(t), std::move(s));
  r->callee_func = func;
  r->args = std::move(args);
  return r;
}
RhsPtr make_indirect_call(Atom callee, std::vector<Atom> args, Type t, Span s) {
  auto r = node(RhsKind::Call, std::move(t), std::move(s));
  r->callee = callee;
  r->args = std::move(args);
  return r;
}
RhsPtr make_construct(const CtorDef* ctor, std::vector<Atom> args, Type t, Span s) {
  auto r = node(RhsKind::Construct, std::move(t), std::move(s));
  r->ctor = ctor;
  r->args = std::move(args);
  return r;
}
RhsPtr make_tuple(std::vector<Atom> args, Type t, Span s) {
  auto r = node(RhsKind::MakeTuple, std::move(t), std::move(s));
  r->args = std::move(args);
  return r;
}
RhsPtr make_proj(Atom tuple, int index, Type t, Span s) {
  auto r = node(RhsKind::Proj, std::move(t), std::move(s));
  r->args = {tuple};
  r->index = index;
  return r;
}
RhsPtr make_param_load(int param, Type t, Span s) {
  auto r = node(RhsKind::ParamLoad, std::move(t), std::move(s));
  r->index = param;
  return r;
}
RhsPtr make_param_index(int param, Atom index, Type t, Span s) {
  auto r = node(RhsKind::ParamIndex, std::move(t), std::move(s));
  r->index = param;
  r->args = {index};
  return r;
}
RhsPtr make_param_gather(int param, Atom list, SizeArg length, Type t, Span s) {
  auto r = node(RhsKind::ParamGather, std::move(t), std::move(s));
  r->index = param;
  r->args = {list};
  r->sizes = {length};
  return r;
}
RhsPtr make_closure(int func, std::vector<Atom> captures, Type t, Span s) {
  auto r = node(RhsKind::MakeClosure, std::move(t), std::move(s));
  r->callee_func = func;
  r->args = std::move(captures);
  return r;
}
RhsPtr make_if(Atom cond, Block then_block, Block else_block, Type t, Span s) {
  auto r = node(RhsKind::If, std::move(t), std::move(s));
  r->args = {cond};
  r->then_block = std::move(then_block);
  r->else_block = std::move(else_block);
  return r;
}
RhsPtr make_match(Atom scrutinee, std::vector<Clause> clauses, Type t, Span s) {
  auto r = node(RhsKind::Match, std::move(t), std::move(s));
  r->args = {scrutinee};
  r->clauses = std::move(clauses);
  return r;
}

int Module::find_function(const std::string& name) const {
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

class Printer {
 public:
  Printer(const Module& m, std::ostringstream& out, const PrintNotes* notes)
      : m_(m), out_(out), notes_(notes) {}

  void module() {
    static const std::vector<std::string> no_names;
    SizeNamesScope names(m_.source ? m_.source->size_names : no_names);
    for (auto& [name, value] : m_.dims) out_ << "dim " << name << " = " << value << "\n";
    for (auto& p : m_.params) {
      out_ << "param @" << p.name;
      if (p.count) out_ << "[" << p.count << "]";
      out_ << ": f32" << shape_str(p.shape) << "\n";
    }
    for (size_t f = 0; f < m_.functions.size(); ++f) {
      func_ = static_cast<int>(f);
      function(m_.functions[f]);
    }
  }

 private:
  std::string var(int v) const { return var_str(*f_, v); }

  std::string atom(const Atom& a) const {
    switch (a.kind) {
      case Atom::Var: return var(a.var);
      case Atom::Int: return std::to_string(a.int_value);
      case Atom::Float: {
        std::ostringstream s;
        s.precision(9);
        s << a.float_value;
        std::string str = s.str();
        if (str.find_first_of(".eEn") == std::string::npos) str += ".0";
        return str;
      }
      case Atom::Bool: return a.bool_value ? "true" : "false";
      case Atom::Unit: return "()";
      case Atom::Func: return "@" + m_.functions[a.func].name;
    }
    return "?";
  }

  std::string atoms(const std::vector<Atom>& as, size_t from = 0) const {
    std::string s;
    for (size_t i = from; i < as.size(); ++i) s += (i > from ? ", " : "") + atom(as[i]);
    return s;
  }

  void function(const Function& f) {
    f_ = &f;
    out_ << "\ndef @" << f.name;
    if (!f.type_params.empty()) {
      out_ << "[";
      for (size_t i = 0; i < f.type_params.size(); ++i) out_ << (i ? ", " : "") << f.type_params[i];
      out_ << "]";
    }
    out_ << "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (i) out_ << ", ";
      if (static_cast<int>(i) < f.num_captures) out_ << "capture ";
      out_ << var(f.params[i]) << ": " << type_str(f.vars[f.params[i]].type);
    }
    out_ << ") -> " << type_str(f.ret) << " {\n";
    block(f.body, 1, nullptr, 0);
    out_ << "}\n";
  }

  void indent(int depth) { out_ << std::string(2 * depth, ' '); }

  // An attribute: a number, or the name of a size variable.
  static std::string attr(const OpAttrs& a, size_t i) {
    return a.is_size(i) ? dim_str(a.ints[i]) : std::to_string(a.ints[i]);
  }

  // Where a node's size variables come from: ` sizes(n=%n.2, ...)`.
  void sizes(const Rhs& r) {
    if (r.sizes.empty()) return;
    out_ << " sizes(";
    for (size_t i = 0; i < r.sizes.size(); ++i) {
      out_ << (i ? ", " : "") << dim_str(r.sizes[i].dim) << "=" << atom(r.sizes[i].value);
    }
    out_ << ")";
  }

  void notes(const std::vector<std::string>& lines, int depth) {
    for (const auto& l : lines) {
      indent(depth);
      out_ << l << "\n";
    }
  }

  // `owner` (null for a function body) and `branch` say which block `b` is, for the notes.
  void block(const Block& b, int depth, const Rhs* owner, size_t branch) {
    if (notes_) notes(notes_->entry(func_, owner, branch), depth);
    for (auto& bind : b.bindings) {
      if (notes_) notes(notes_->before(func_, *bind.rhs), depth);
      indent(depth);
      out_ << var(bind.var) << ": " << type_str(bind.rhs->type) << " = ";
      rhs(*bind.rhs, depth);
      out_ << "\n";
      if (notes_) notes(notes_->after(func_, *bind.rhs), depth);
    }
    indent(depth);
    out_ << atom(b.result) << (notes_ ? notes_->result(func_, owner, branch) : "") << "\n";
  }

  void pattern(const Pattern& p) {
    switch (p.kind) {
      case Pattern::Wildcard: out_ << "_"; break;
      case Pattern::Bind: out_ << var(p.var); break;
      case Pattern::Ctor:
      case Pattern::Tuple:
        if (p.kind == Pattern::Ctor) out_ << p.ctor->name;
        if (p.kind == Pattern::Tuple || !p.subs.empty()) {
          out_ << "(";
          for (size_t i = 0; i < p.subs.size(); ++i) {
            if (i) out_ << ", ";
            pattern(*p.subs[i]);
          }
          out_ << ")";
        }
        break;
    }
  }

  void rhs(const Rhs& r, int depth) {
    switch (r.kind) {
      case RhsKind::Copy: out_ << atom(r.args[0]); break;
      case RhsKind::Op: {
        out_ << op_info(r.op).name << "(" << atoms(r.args);
        const auto& specs = op_info(r.op).attrs;
        size_t i = 0;
        for (auto& spec : specs) {
          if (spec.variadic) {
            out_ << (r.args.empty() && i == 0 ? "" : ", ") << spec.name << "=[";
            for (size_t j = i; j < r.attrs.ints.size(); ++j) out_ << (j > i ? ", " : "") << attr(r.attrs, j);
            out_ << "]";
            i = r.attrs.ints.size();
          } else if (i < r.attrs.ints.size()) {
            out_ << (r.args.empty() && i == 0 ? "" : ", ") << spec.name << "=" << attr(r.attrs, i);
            ++i;
          }
        }
        if (r.op == OpId::Constant) out_ << "value=" << atom(Atom::floating(r.attrs.value));
        out_ << ")";
        sizes(r);
        break;
      }
      case RhsKind::Host: out_ << "host." << host_op_name(r.host_op) << "(" << atoms(r.args) << ")"; break;
      case RhsKind::Call:
        out_ << "call " << (r.callee_func >= 0 ? "@" + m_.functions[r.callee_func].name : atom(r.callee))
             << "(" << atoms(r.args) << ")";
        break;
      case RhsKind::Construct:
        out_ << r.ctor->name;
        if (!r.args.empty()) out_ << "(" << atoms(r.args) << ")";
        break;
      case RhsKind::MakeTuple: out_ << "(" << atoms(r.args) << (r.args.size() == 1 ? ",)" : ")"); break;
      case RhsKind::Proj: out_ << atom(r.args[0]) << "." << r.index; break;
      case RhsKind::ParamLoad: out_ << "@" << m_.params[r.index].name; break;
      case RhsKind::ParamIndex: out_ << "@" << m_.params[r.index].name << "[" << atom(r.args[0]) << "]"; break;
      case RhsKind::ParamGather:
        out_ << "gather @" << m_.params[r.index].name << "[" << atom(r.args[0]) << "]";
        sizes(r);
        break;
      case RhsKind::MakeClosure:
        out_ << "closure @" << m_.functions[r.callee_func].name << "(" << atoms(r.args) << ")";
        break;
      case RhsKind::If:
        out_ << "if " << atom(r.args[0]) << " {\n";
        block(r.then_block, depth + 1, &r, 0);
        indent(depth);
        out_ << "} else {\n";
        block(r.else_block, depth + 1, &r, 1);
        indent(depth);
        out_ << "}";
        break;
      case RhsKind::Match:
        out_ << "match " << atom(r.args[0]) << " {\n";
        for (size_t i = 0; i < r.clauses.size(); ++i) {
          const Clause& c = r.clauses[i];
          indent(depth + 1);
          pattern(*c.pattern);
          out_ << " => {\n";
          block(c.body, depth + 2, &r, i);
          indent(depth + 1);
          out_ << "}\n";
        }
        indent(depth);
        out_ << "}";
        break;
    }
  }

  const Module& m_;
  std::ostringstream& out_;
  const PrintNotes* notes_;
  const Function* f_ = nullptr;
  int func_ = 0;
};

}  // namespace

std::string var_str(const Function& f, int v) {
  const std::string& name = f.vars[v].name;
  std::string out = "%";
  if (!name.empty()) out.append(name).append(".");
  return out.append(std::to_string(v));
}

std::vector<std::string> PrintNotes::before(int, const Rhs&) const { return {}; }
std::vector<std::string> PrintNotes::after(int, const Rhs&) const { return {}; }
std::vector<std::string> PrintNotes::entry(int, const Rhs*, size_t) const { return {}; }
std::string PrintNotes::result(int, const Rhs*, size_t) const { return ""; }

std::string print_module(const Module& module, const PrintNotes* notes) {
  std::ostringstream out;
  Printer(module, out, notes).module();
  return out.str();
}

}  // namespace acrobat::ir
