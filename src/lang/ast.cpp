#include "lang/ast.h"

#include <sstream>

namespace acrobat::ast {

const char* binop_symbol(BinOp op) {
  switch (op) {
    case BinOp::Add: return "+";
    case BinOp::Sub: return "-";
    case BinOp::Mul: return "*";
    case BinOp::Div: return "/";
    case BinOp::Mod: return "%";
    case BinOp::MatMul: return "@";
    case BinOp::Lt: return "<";
    case BinOp::Le: return "<=";
    case BinOp::Gt: return ">";
    case BinOp::Ge: return ">=";
    case BinOp::Eq: return "==";
    case BinOp::Ne: return "!=";
    case BinOp::And: return "&&";
    case BinOp::Or: return "||";
  }
  return "?";
}

namespace {
// Destroys the chain hanging from `link` one node at a time: each node is detached from the next
// before it dies, so no destructor recurses along the chain.
template <class Node, class Ptr, class Member>
void unlink_chain(Ptr& link, Member next, bool (*same_kind)(const Ptr&)) {
  Ptr rest = std::move(link);
  while (rest && same_kind(rest)) {
    Ptr after = std::move(static_cast<Node&>(*rest).*next);
    rest = std::move(after);  // the detached node dies with an empty link
  }
}
}  // namespace

Let::~Let() {
  unlink_chain<Let>(body, &Let::body, +[](const ExprPtr& e) { return e->kind == ExprKind::Let; });
}
If::~If() {
  unlink_chain<If>(else_branch, &If::else_branch,
                   +[](const ExprPtr& e) { return e->kind == ExprKind::If; });
}
Binary::~Binary() {
  unlink_chain<Binary>(lhs, &Binary::lhs,
                       +[](const ExprPtr& e) { return e->kind == ExprKind::Binary; });
}
DimExpr::~DimExpr() {
  unlink_chain<DimExpr>(lhs, &DimExpr::lhs,
                        +[](const DimExprPtr& d) { return d->kind == DimExpr::Binary; });
}

std::optional<double> literal_number(const Expr& e) {
  switch (e.kind) {
    case ExprKind::IntLit: return static_cast<double>(e.as<IntLit>().value);
    case ExprKind::FloatLit: return e.as<FloatLit>().value;
    case ExprKind::Unary: {
      const auto& u = e.as<Unary>();
      if (u.op != '-' || (u.operand->kind != ExprKind::IntLit && u.operand->kind != ExprKind::FloatLit)) break;
      return -*literal_number(*u.operand);
    }
    default: break;
  }
  return std::nullopt;
}

const FuncDecl* Module::find_func(const std::string& name) const {
  for (auto& f : funcs)
    if (f->name == name) return f.get();
  return nullptr;
}

const AdtDef* Module::find_adt(const std::string& name) const {
  for (auto& t : types)
    if (t->name == name) return t->def.get();
  return nullptr;
}

namespace {

class AstPrinter {
 public:
  explicit AstPrinter(std::ostringstream& out) : out_(out) {}

  void module(const Module& m) {
    for (auto& d : m.dims)
      out_ << "dim " << d->name << " = " << d->resolved << (d->overridden ? "  // --set" : "")
           << "\n";
    for (auto& p : m.params) {
      out_ << "param " << p->name;
      if (p->count) out_ << "[" << p->resolved_count << "]";
      out_ << ": f32" << shape_str(p->shape) << "\n";
    }
    for (auto& t : m.types) {
      if (!t->def) continue;
      out_ << "type " << t->name;
      if (!t->type_params.empty()) out_ << "[" << join(t->type_params) << "]";
      out_ << " =";
      for (size_t i = 0; i < t->def->ctors.size(); ++i) {
        auto& c = t->def->ctors[i];
        out_ << (i ? " | " : " ") << c->name;
        if (!c->fields.empty()) {
          out_ << "(";
          for (size_t j = 0; j < c->fields.size(); ++j) out_ << (j ? ", " : "") << type_str(c->fields[j]);
          out_ << ")";
        }
      }
      out_ << "\n";
    }
    for (auto& f : m.funcs) {
      out_ << "\ndef " << f->name;
      if (!f->type_params.empty()) out_ << "[" << join(f->type_params) << "]";
      out_ << "(";
      for (size_t i = 0; i < f->params.size(); ++i)
        out_ << (i ? ", " : "") << f->params[i].name << ": " << type_of(f->params[i].var);
      out_ << ") -> " << (f->type ? type_str(f->type->ret) : "?") << " {\n";
      indent_ = 1;
      line_start();
      expr(*f->body);
      out_ << "\n}\n";
    }
  }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  }
  static std::string type_of(const LocalVarPtr& v) {
    return v && v->type ? type_str(v->type) : "?";
  }
  void line_start() { out_ << std::string(2 * indent_, ' '); }
  void newline() {
    out_ << "\n";
    line_start();
  }

  void pattern(const Pattern& p) {
    switch (p.kind) {
      case Pattern::Wildcard: out_ << "_"; break;
      case Pattern::Bind: out_ << p.name; break;
      case Pattern::Ctor:
      case Pattern::Tuple:
        if (p.kind == Pattern::Ctor) out_ << p.name;
        if (p.kind == Pattern::Tuple || p.has_parens) {
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

  void args(const std::vector<ExprPtr>& xs) {
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i) out_ << ", ";
      expr(*xs[i]);
    }
  }

  void expr(const Expr& e) {
    switch (e.kind) {
      case ExprKind::IntLit: out_ << e.as<IntLit>().value; break;
      case ExprKind::FloatLit: out_ << e.as<FloatLit>().value; break;
      case ExprKind::BoolLit: out_ << (e.as<BoolLit>().value ? "true" : "false"); break;
      case ExprKind::Name: out_ << e.as<Name>().name; break;
      case ExprKind::Call: {
        auto& c = e.as<Call>();
        expr(*c.callee);
        out_ << "(";
        args(c.args);
        for (auto& n : c.named) {
          out_ << ", " << n.name << "=";
          expr(*n.value);
        }
        out_ << ")";
        break;
      }
      case ExprKind::Index:
        expr(*e.as<Index>().base);
        out_ << "[";
        expr(*e.as<Index>().index);
        out_ << "]";
        break;
      case ExprKind::Proj:
        expr(*e.as<Proj>().base);
        out_ << "." << e.as<Proj>().index;
        break;
      case ExprKind::Tuple:
        out_ << "(";
        args(e.as<Tuple>().elems);
        if (e.as<Tuple>().elems.size() == 1) out_ << ",";
        out_ << ")";
        break;
      case ExprKind::Unary:
        out_ << e.as<Unary>().op;
        expr(*e.as<Unary>().operand);
        break;
      case ExprKind::Binary: {
        // Fully parenthesised: ((a + b) - c).
        auto chain = binary_chain(e);
        for (size_t i = 0; i < chain.size(); ++i) out_ << "(";
        expr(*chain.back()->lhs);
        for (size_t i = chain.size(); i-- > 0;) {
          out_ << " " << binop_symbol(chain[i]->op) << " ";
          expr(*chain[i]->rhs);
          out_ << ")";
        }
        break;
      }
      case ExprKind::Let: {
        auto chain = let_chain(e);
        for (const Let* l : chain) {
          out_ << "let ";
          pattern(*l->pattern);
          out_ << ": " << (l->value->type ? type_str(l->value->type) : "?") << " = ";
          expr(*l->value);
          out_ << ";";
          newline();
        }
        expr(*chain.back()->body);
        break;
      }
      case ExprKind::If: {
        auto chain = if_chain(e);
        for (const If* i : chain) {
          out_ << "if ";
          expr(*i->cond);
          block(*i->then_branch);
          out_ << " else";
          if (i != chain.back()) out_ << " ";
        }
        block(*chain.back()->else_branch);
        break;
      }
      case ExprKind::Match: {
        auto& m = e.as<Match>();
        out_ << "match ";
        expr(*m.scrutinee);
        out_ << " {";
        ++indent_;
        for (auto& c : m.clauses) {
          newline();
          pattern(*c.pattern);
          out_ << " =>";
          block(*c.body);
          out_ << ",";
        }
        --indent_;
        newline();
        out_ << "}";
        break;
      }
      case ExprKind::Lambda: {
        auto& l = e.as<Lambda>();
        out_ << "fn(";
        for (size_t i = 0; i < l.params.size(); ++i)
          out_ << (i ? ", " : "") << l.params[i].name << ": " << type_of(l.params[i].var);
        out_ << ")";
        block(*l.body);
        break;
      }
    }
  }

  void block(const Expr& e) {
    out_ << " {";
    ++indent_;
    newline();
    expr(e);
    --indent_;
    newline();
    out_ << "}";
  }

  std::ostringstream& out_;
  int indent_ = 0;
};

}  // namespace

std::string print_ast(const Module& module) {
  std::ostringstream out;
  AstPrinter(out).module(module);
  return out.str();
}

}  // namespace acrobat::ast
