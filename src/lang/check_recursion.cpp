// The base-case check: a function (or a group of mutually recursive functions) that calls back into
// its group on every path can never return.
#include <functional>
#include <map>
#include <set>

#include "lang/checker.h"

namespace acrobat::checker {

namespace {

// Calls fn on e and every sub-expression (along chains of lets, else-ifs and binary operators by
// loops: ast.h).
void visit(const Expr& e, const std::function<void(const Expr&)>& fn) {
  fn(e);
  switch (e.kind) {
    case ExprKind::Call:
      visit(*e.as<Call>().callee, fn);
      for (auto& a : e.as<Call>().args) visit(*a, fn);
      break;
    case ExprKind::Index:
      visit(*e.as<Index>().base, fn);
      visit(*e.as<Index>().index, fn);
      break;
    case ExprKind::Proj: visit(*e.as<Proj>().base, fn); break;
    case ExprKind::Tuple:
      for (auto& x : e.as<ast::Tuple>().elems) visit(*x, fn);
      break;
    case ExprKind::Unary: visit(*e.as<Unary>().operand, fn); break;
    case ExprKind::Binary: {
      auto chain = binary_chain(e);
      for (size_t i = 1; i < chain.size(); ++i) fn(*chain[i]);
      visit(*chain.back()->lhs, fn);
      for (const Binary* b : chain) visit(*b->rhs, fn);
      break;
    }
    case ExprKind::Let: {
      auto chain = let_chain(e);
      for (const Let* l : chain) {
        if (l != chain.front()) fn(*l);
        visit(*l->value, fn);
      }
      visit(*chain.back()->body, fn);
      break;
    }
    case ExprKind::If: {
      auto chain = if_chain(e);
      for (const If* i : chain) {
        if (i != chain.front()) fn(*i);
        visit(*i->cond, fn);
        visit(*i->then_branch, fn);
      }
      visit(*chain.back()->else_branch, fn);
      break;
    }
    case ExprKind::Match:
      visit(*e.as<Match>().scrutinee, fn);
      for (auto& c : e.as<Match>().clauses) visit(*c.body, fn);
      break;
    case ExprKind::Lambda: visit(*e.as<Lambda>().body, fn); break;
    default: break;
  }
}

// Adds every function that e names to `out`.
void collect_calls(const Expr& e, std::set<const FuncDecl*>& out) {
  visit(e, [&](const Expr& x) {
    if (x.kind == ExprKind::Name && x.as<Name>().ref == NameRef::Function)
      out.insert(x.as<Name>().func);
  });
}

// True when evaluating e necessarily calls a function of `group` (lambda bodies do not run).
bool must_call(const Expr& e, const std::set<const FuncDecl*>& group) {
  switch (e.kind) {
    case ExprKind::Call: {
      auto& c = e.as<Call>();
      if (c.callee->kind == ExprKind::Name && c.callee->as<Name>().ref == NameRef::Function &&
          group.count(c.callee->as<Name>().func))
        return true;
      if (must_call(*c.callee, group)) return true;
      for (auto& a : c.args)
        if (must_call(*a, group)) return true;
      return false;
    }
    case ExprKind::Index: return must_call(*e.as<Index>().index, group);
    case ExprKind::Proj: return must_call(*e.as<Proj>().base, group);
    case ExprKind::Tuple:
      for (auto& x : e.as<ast::Tuple>().elems)
        if (must_call(*x, group)) return true;
      return false;
    case ExprKind::Unary: return must_call(*e.as<Unary>().operand, group);
    case ExprKind::Binary: {
      // The right operand of && and || may not run.
      auto chain = binary_chain(e);
      for (const Binary* b : chain)
        if (b->op != BinOp::And && b->op != BinOp::Or && must_call(*b->rhs, group)) return true;
      return must_call(*chain.back()->lhs, group);
    }
    case ExprKind::Let: {
      auto chain = let_chain(e);
      for (const Let* l : chain)
        if (must_call(*l->value, group)) return true;
      return must_call(*chain.back()->body, group);
    }
    case ExprKind::If: {
      // Arm k calls when its condition does, or its then-branch and everything after its else do.
      auto chain = if_chain(e);
      bool rest = must_call(*chain.back()->else_branch, group);
      for (size_t k = chain.size(); k-- > 0;)
        rest = must_call(*chain[k]->cond, group) || (rest && must_call(*chain[k]->then_branch, group));
      return rest;
    }
    case ExprKind::Match: {
      auto& m = e.as<Match>();
      if (must_call(*m.scrutinee, group)) return true;
      for (auto& c : m.clauses)
        if (!must_call(*c.body, group)) return false;
      return true;
    }
    default: return false;
  }
}

}  // namespace

void Checker::check_recursion() {
  std::map<const FuncDecl*, std::set<const FuncDecl*>> calls;
  for (auto& f : m_.funcs) collect_calls(*f->body, calls[f.get()]);
  // The group of f: the functions that reach f and are reached by f (its strongly connected
  // component), computed by reachability since modules are small.
  auto reach = [&](const FuncDecl* from) {
    std::set<const FuncDecl*> seen;
    std::vector<const FuncDecl*> work = {from};
    while (!work.empty()) {
      auto* g = work.back();
      work.pop_back();
      for (auto* h : calls[g])
        if (seen.insert(h).second) work.push_back(h);
    }
    return seen;
  };
  std::map<const FuncDecl*, std::set<const FuncDecl*>> reaches;
  for (auto& f : m_.funcs) reaches[f.get()] = reach(f.get());
  for (auto& f : m_.funcs) {
    if (!reaches[f.get()].count(f.get())) continue;
    std::set<const FuncDecl*> group;
    for (auto* g : reaches[f.get()])
      if (reaches[g].count(f.get())) group.insert(g);
    if (must_call(*f->body, group)) {
      std::string names;  // in declaration order
      for (auto& g : m_.funcs)
        if (group.count(g.get())) names += (names.empty() ? "" : ", ") + quote(g->name);
      sink_.error(f->span.begin, "function " + quote(f->name) +
                                     " never returns: every path through its body calls " +
                                     names + " again; add a base case (a branch that returns "
                                     "without recursing)");
    }
  }
}

}  // namespace acrobat::checker
