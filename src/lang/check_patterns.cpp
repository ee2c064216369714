// Matches and patterns: binding patterns to the types they take apart, and the exhaustiveness of
// match clauses.
#include <algorithm>
#include <set>

#include "lang/checker.h"

namespace acrobat::checker {

namespace {

bool irrefutable(const Pattern& p) {
  if (p.kind == Pattern::Wildcard || p.kind == Pattern::Bind) return true;
  if (p.kind == Pattern::Tuple)
    return std::all_of(p.subs.begin(), p.subs.end(), [](auto& s) { return irrefutable(*s); });
  return false;
}

// A constructor pattern naming no constructor (reported by bind_pattern).
bool has_unknown_ctor(const Pattern& p) {
  if (p.kind == Pattern::Ctor && !p.ctor) return true;
  return std::any_of(p.subs.begin(), p.subs.end(), [](auto& s) { return has_unknown_ctor(*s); });
}

}  // namespace

Type Checker::infer_match(Match& m) {
  Type scrut = infer_at(*m.scrutinee, false);
  Type result = fresh();
  for (auto& c : m.clauses) {
    size_t mark = scope_.vars.size();
    bind_pattern(*c.pattern, scrut, /*refutable_ok=*/true);
    const size_t first_size = sizes_.size();
    Type body = infer(*c.body);
    keep_gathers_inside(first_size, body, "match clause");
    expect(result, body, c.body->span.begin, "match clauses must all have the same type");
    scope_.vars.resize(mark);
  }
  check_exhaustive(m, shallow(scrut));
  return result;
}

void Checker::check_exhaustive(const Match& m, const Type& scrut) {
  std::set<int> covered;
  for (auto& c : m.clauses) {
    if (irrefutable(*c.pattern)) return;
    if (has_unknown_ctor(*c.pattern)) return;  // what the clause meant to cover is unknown
    if (c.pattern->kind == Pattern::Ctor && c.pattern->ctor &&
        std::all_of(c.pattern->subs.begin(), c.pattern->subs.end(),
                    [](auto& s) { return irrefutable(*s); }))
      covered.insert(c.pattern->ctor->tag);
  }
  if (scrut->kind == TypeKind::Var) return;  // unknown: reported, or nothing to say
  for (auto& c : m.clauses)  // a constructor of another type: a type error, reported
    if (c.pattern->kind == Pattern::Ctor &&
        (scrut->kind != TypeKind::Adt || c.pattern->ctor->adt != scrut->adt))
      return;
  if (scrut->kind != TypeKind::Adt) {  // e.g. a tuple of data types: only a catch-all covers all
    sink_.error(m.span.begin, "match on " + type_str(zonk(scrut)) +
                                  " is not exhaustive: add a clause that matches every value, "
                                  "e.g. `_ => ...`");
    return;
  }
  std::string missing;
  for (auto& ctor : scrut->adt->ctors) {
    if (covered.count(ctor->tag)) continue;
    std::string shown = ctor->name;
    if (!ctor->fields.empty()) {
      shown += "(";
      for (size_t i = 0; i < ctor->fields.size(); ++i) shown += i ? ", _" : "_";
      shown += ")";
    }
    missing += (missing.empty() ? "" : ", ") + shown;
  }
  if (!missing.empty())
    sink_.error(m.span.begin, "match on " + type_str(zonk(scrut)) +
                                  " is not exhaustive: no clause matches " + missing +
                                  " (add clauses or a catch-all `_ => ...`)");
}

void Checker::bind_pattern(Pattern& p, const Type& t, bool refutable_ok) {
  p.type = t;
  switch (p.kind) {
    case Pattern::Wildcard: return;
    case Pattern::Bind: {
      p.var = std::make_shared<LocalVar>(LocalVar{p.name, t, p.span});
      scope_.vars.push_back(p.var);
      return;
    }
    case Pattern::Tuple: {
      Type s = shallow(t);
      if (is_error(s)) {  // reported already
        for (auto& sub : p.subs) bind_pattern(*sub, error_type(), refutable_ok);
        return;
      }
      if (s->kind == TypeKind::Var) {
        std::vector<Type> elems;
        for (size_t i = 0; i < p.subs.size(); ++i) elems.push_back(fresh());
        unify(s, tuple_type(elems));
        s = shallow(t);
      }
      if (s->kind != TypeKind::Tuple || s->args.size() != p.subs.size()) {
        sink_.error(p.span.begin, "tuple pattern with " + std::to_string(p.subs.size()) +
                                      " elements: expected a value of type " +
                                      type_str(zonk(t)) + " to be a tuple of that size");
        for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
        return;
      }
      for (size_t i = 0; i < p.subs.size(); ++i) bind_pattern(*p.subs[i], s->args[i], refutable_ok);
      return;
    }
    case Pattern::Ctor: {
      if (redefined_.count(p.name)) {  // reported; p.ctor stays null
        for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
        return;
      }
      auto it = ctors_.find(p.name);
      if (it == ctors_.end() && !p.has_parens) {
        // An upper-case name that is no constructor binds a variable (e.g. a matrix `A`).
        p.kind = Pattern::Bind;
        bind_pattern(p, t, refutable_ok);
        return;
      }
      if (it == ctors_.end()) {
        sink_.error(p.span.begin, "unknown constructor " + quote(p.name) + " in pattern" +
                                      suggestion(p.name));
        for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
        return;
      }
      const CtorDef* ctor = it->second;
      p.ctor = ctor;
      if (!refutable_ok && ctor->adt->ctors.size() > 1)
        sink_.error(p.span.begin, "let cannot take apart " + ctor->adt->name +
                                      " with constructor " + quote(p.name) +
                                      ": it has other constructors; use match");
      std::vector<Type> args;
      Type adt = instantiate(adt_type(ctor->adt, param_types(ctor->adt)),
                             ctor->adt->type_params, args);
      expect(t, adt, p.span.begin, "pattern " + quote(p.name));
      if (p.subs.size() != ctor->fields.size()) {
        sink_.error(p.span.begin, "constructor " + quote(p.name) + " has " +
                                      std::to_string(ctor->fields.size()) +
                                      " field(s), the pattern gives " +
                                      std::to_string(p.subs.size()));
        for (auto& sub : p.subs) bind_pattern(*sub, fresh(), refutable_ok);
        return;
      }
      for (size_t i = 0; i < p.subs.size(); ++i)
        bind_pattern(*p.subs[i], substitute_params(ctor->fields[i], ctor->adt->type_params, args),
                     refutable_ok);
      return;
    }
  }
}

}  // namespace acrobat::checker
