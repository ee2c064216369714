// Specialisation of higher-order calls (see specialise.h).
//
// Algorithm:
//  1. Specialisable parameters. Parameter k of function g is specialisable when every use of it
//     in g's body is either the callee of an indirect call (`call %f(...)`), or an argument at
//     position j of a direct call `call @h(...)` whose parameter j is itself specialisable; the
//     common case is g passing it on unchanged, in the same position, to a recursive call of
//     itself (foldl, map). This is a greatest fixpoint: start from "every parameter is
//     specialisable" and strike out, until nothing changes, each parameter with another kind of use
//     (stored in a tuple or a data type, returned, captured by a lambda, tested, passed to an
//     indirect call) or passed on to a parameter already struck out.
//  2. Known functions. In each function, a variable bound by `closure @F(c...)`, or by a copy of
//     `@F` or of such a variable, holds the known function F with the captured values c... (none
//     for @F).
//  3. Rewriting call sites, in every function:
//     - `call %v(args)` with %v known as F(c...) becomes `call @F(c..., args)`;
//     - `call @g(..., a_k, ...)` with a_k a known function F(c...) (or the atom @F) and parameter k
//       of g specialisable becomes `call @g$F(c..., args without a_k)`. The copy g$F takes new
//       leading parameters for c... in place of parameter k, and its body starts by rebuilding that
//       parameter's value from them: `%p = closure @F(c...)` (or `%p = @F`). Copies are memoised
//       by (g, k, F), so all sites passing the same function share one copy.
//  4. Rounds of 1-3 until no site changes. A copy's body holds a known function of its own (the
//     rebuilt %p), so the next round turns its calls through %p into direct calls, its recursive
//     call into a call of the copy itself (the memo hands back g$F; the captures are threaded
//     through as arguments), and a call that passes %p on (a user function handing its `f` to map)
//     into a further specialisation.
//  5. Closure bindings and copies of function values left without uses are removed, so a lambda
//     that was only ever passed to specialised calls is no longer a value anywhere.
//
// Termination: every site rewrite removes an indirect call or a known function argument. The
// functions passed are always functions of the lowered module (copies are never used as values), so
// the memo makes at most one copy per (callee, position, function); a copy is itself specialised
// only where a site passes it a further known function (a callee with several function parameters
// loses one per round). Programs that build a new closure for each recursive call are excluded by
// step 1 (a parameter captured by a lambda is not specialisable). As a safety net the rounds and
// the number of copies are bounded (kMaxRounds, kMaxSpecialisations); whatever is left when a bound
// is hit stays an ordinary, correct, indirect or higher-order call.
//
// Limits: only functions visible in the caller are known. A function received through a parameter
// of a function that was not specialised, read out of a tuple or data type, chosen by an `if`, or
// returned by a call stays an indirect call. Copies keep the callee's (possibly generic) types; the
// copy's rebuilt parameter keeps its variable, so every variable index stays valid, and a copy gets
// fresh IR nodes (later passes key what they find by node).
#include "transforms/specialise.h"

#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "ir/walk.h"
#include "support/diagnostics.h"

namespace acrobat {

using namespace ir;

namespace {

constexpr int kMaxRounds = 32;
constexpr size_t kMaxSpecialisations = 512;

// A function value whose target is known where it is used.
struct KnownFunction {
  int func = -1;
  std::vector<Atom> captures;  // the closure's captured values, atoms of the function using it
};

using KnownMap = std::map<int, KnownFunction>;  // variable -> its known function value

KnownMap known_functions(const Block& body) {
  KnownMap known;
  for_each_block(body, [&](const Block& block) {
    for (const Binding& b : block.bindings) {
      const Rhs& r = *b.rhs;
      if (r.kind == RhsKind::MakeClosure) {
        known[b.var] = KnownFunction{r.callee_func, r.args};
      } else if (r.kind == RhsKind::Copy) {
        const Atom& a = r.args[0];
        if (a.kind == Atom::Func) known[b.var] = KnownFunction{a.func, {}};
        if (a.kind == Atom::Var && known.count(a.var)) known[b.var] = known.at(a.var);
      }
    }
  });
  return known;
}

std::optional<KnownFunction> known_value(const Atom& a, const KnownMap& known) {
  if (a.kind == Atom::Func) return KnownFunction{a.func, {}};
  if (a.kind == Atom::Var) {
    auto it = known.find(a.var);
    if (it != known.end()) return it->second;
  }
  return std::nullopt;
}

bool is_var(const Atom& a, int v) { return a.kind == Atom::Var && a.var == v; }

class Specialiser {
 public:
  explicit Specialiser(Module& m) : m_(m) {}

  std::vector<SpecialisationRecord> run() {
    for (int round = 0; round < kMaxRounds; ++round) {
      find_specialisable_params();
      bool changed = false;
      // Copies appended during the round are visited in the same round.
      for (size_t f = 0; f < m_.functions.size(); ++f)
        changed |= rewrite_sites(static_cast<int>(f));
      if (!changed) break;
    }
    for (Function& f : m_.functions) remove_dead_function_values(f);
    return std::move(records_);
  }

 private:
  // Step 1: the greatest fixpoint of "every use is a call or a pass-on to a specialisable param".
  void find_specialisable_params() {
    specialisable_.assign(m_.functions.size(), {});
    for (size_t f = 0; f < m_.functions.size(); ++f)
      specialisable_[f].assign(m_.functions[f].params.size(), true);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t f = 0; f < m_.functions.size(); ++f)
        for (size_t k = 0; k < m_.functions[f].params.size(); ++k)
          if (specialisable_[f][k] &&
              !only_called_or_passed_on(m_.functions[f], m_.functions[f].params[k])) {
            specialisable_[f][k] = false;
            changed = true;
          }
    }
  }

  bool specialisable(int func, size_t param) const {
    return func >= 0 && static_cast<size_t>(func) < specialisable_.size() &&
           param < specialisable_[func].size() && specialisable_[func][param];
  }

  bool only_called_or_passed_on(const Function& f, int var) const {
    bool ok = true;
    for_each_block(f.body, [&](const Block& block) {
      if (is_var(block.result, var)) ok = false;
      for (const Binding& b : block.bindings) {
        const Rhs& r = *b.rhs;
        for (size_t j = 0; j < r.args.size(); ++j)
          if (is_var(r.args[j], var) &&
              !(r.kind == RhsKind::Call && r.callee_func >= 0 && specialisable(r.callee_func, j)))
            ok = false;
        // Being the callee of an indirect call (r.callee) is the use we want.
      }
    });
    return ok;
  }

  // Step 3 for one function. Works on a copy of the body: specialising appends to m_.functions.
  bool rewrite_sites(int fi) {
    Block body = m_.functions[fi].body;
    KnownMap known = known_functions(body);
    bool changed = rewrite_rhs(body, [&](const Rhs& r) -> RhsPtr {
      if (r.kind != RhsKind::Call) return nullptr;
      if (r.callee_func < 0) {
        auto target = known_value(r.callee, known);
        if (!target) return nullptr;
        std::vector<Atom> args = target->captures;
        args.insert(args.end(), r.args.begin(), r.args.end());
        return make_call(target->func, std::move(args), r.type, r.span);
      }
      for (size_t k = 0; k < r.args.size(); ++k) {
        auto passed = known_value(r.args[k], known);
        if (!passed || !specialisable(r.callee_func, k)) continue;
        int copy = specialisation(r.callee_func, k, *passed);
        if (copy < 0) continue;
        std::vector<Atom> args = passed->captures;
        for (size_t j = 0; j < r.args.size(); ++j)
          if (j != k) args.push_back(r.args[j]);
        return make_call(copy, std::move(args), r.type, r.span);
      }
      return nullptr;
    });
    if (changed) m_.functions[fi].body = std::move(body);
    return changed;
  }

  // The copy of `callee` without parameter k, for the function `passed`; -1 past the bound.
  int specialisation(int callee, size_t k, const KnownFunction& passed) {
    auto key = std::make_tuple(callee, k, passed.func);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (records_.size() >= kMaxSpecialisations) return -1;

    const Function& src = m_.functions[callee];
    const Function& fn = m_.functions[passed.func];
    ACROBAT_ASSERT(passed.captures.size() <= fn.params.size(),
                   "closure of " + fn.name + " captures too much");
    Function copy = src;
    copy.body = deep_copy(src.body);
    copy.name = unique_name(src.name + "$" + fn.name);
    copy.origin = FunctionOrigin{FunctionOrigin::Specialisation, callee};
    std::vector<int> params;
    std::vector<Atom> captures;
    for (size_t j = 0; j < passed.captures.size(); ++j) {
      const VarInfo& capture = fn.vars[fn.params[j]];
      copy.vars.push_back(capture);
      params.push_back(static_cast<int>(copy.vars.size()) - 1);
      captures.push_back(Atom::variable(params.back()));
    }
    for (size_t j = 0; j < src.params.size(); ++j)
      if (j != k) params.push_back(src.params[j]);
    copy.params = std::move(params);
    copy.num_captures = static_cast<int>(passed.captures.size()) + src.num_captures -
                        (static_cast<int>(k) < src.num_captures ? 1 : 0);
    int p = src.params[k];
    const VarInfo& info = src.vars[p];
    RhsPtr rebuild = captures.empty() ? make_copy(Atom::function(passed.func), info.type, info.span)
                                      : make_closure(passed.func, captures, info.type, info.span);
    copy.body.bindings.insert(copy.body.bindings.begin(), Binding{p, std::move(rebuild)});

    records_.push_back(SpecialisationRecord{src.name, fn.name, copy.name});
    int index = static_cast<int>(m_.functions.size());
    m_.functions.push_back(std::move(copy));  // invalidates src and fn
    memo_[key] = index;
    return index;
  }

  std::string unique_name(const std::string& base) const {
    if (m_.find_function(base) < 0) return base;
    for (int n = 2;; ++n) {
      std::string name = base + "$" + std::to_string(n);
      if (m_.find_function(name) < 0) return name;
    }
  }

  // Step 5: drops closures and function-value copies nobody uses (repeatedly: a dead copy of a
  // closure leaves the closure dead).
  static void remove_dead_function_values(Function& f) {
    for (bool removed = true; removed;) {
      KnownMap known = known_functions(f.body);
      std::vector<int> uses(f.vars.size(), 0);
      auto use = [&](const Atom& a) {
        if (a.kind == Atom::Var) ++uses[a.var];
      };
      for_each_block(f.body, [&](const Block& block) {
        use(block.result);
        for (const Binding& b : block.bindings) {
          for (const Atom& a : b.rhs->args) use(a);
          if (b.rhs->kind == RhsKind::Call && b.rhs->callee_func < 0) use(b.rhs->callee);
        }
      });
      std::function<bool(Block&)> sweep = [&](Block& block) {
        bool swept = false;
        std::vector<Binding> kept;
        for (Binding& b : block.bindings) {
          if (known.count(b.var) && uses[b.var] == 0) {
            swept = true;
            continue;
          }
          if (b.rhs->kind == RhsKind::If || b.rhs->kind == RhsKind::Match) {
            auto copy = std::make_shared<Rhs>(*b.rhs);
            bool inner = sweep(copy->then_block);
            inner |= sweep(copy->else_block);
            for (Clause& c : copy->clauses) inner |= sweep(c.body);
            if (inner) b.rhs = std::move(copy);
            swept |= inner;
          }
          kept.push_back(std::move(b));
        }
        block.bindings = std::move(kept);
        return swept;
      };
      removed = sweep(f.body);
    }
  }

  Module& m_;
  std::vector<std::vector<bool>> specialisable_;  // [function][param], for this round
  std::map<std::tuple<int, size_t, int>, int> memo_;  // (callee, param, function passed) -> copy
  std::vector<SpecialisationRecord> records_;
};

}  // namespace

Specialised specialise_higher_order(ir::Module module) {
  std::vector<SpecialisationRecord> records = Specialiser(module).run();
  ir::number_new_sites(module);  // the specialised copies
  return {std::move(module), std::move(records)};
}

}  // namespace acrobat
