// Parameter-reuse taint analysis (see reuse.h).
//
// Abstract values. Every variable gets a value of the lattice
//     Bottom  <  Reuse(p), Indexed(p)  <  Scatter        for tensors
//     Bottom  <  Tuple(v1, ..., vn)    <  Scatter        for tuples, field by field
// Reuse(p) is always the whole tensor of param p, Indexed(p) a row of the indexed param p chosen at
// run time, Scatter anything else. Joining different params, Reuse with Indexed, or a tuple with a
// leaf gives Scatter. Transfer: ParamLoad gives Reuse(p), ParamIndex Indexed(p); Copy propagates;
// MakeTuple, Proj and tuple patterns build and take apart tuples; If and Match join the results of
// their blocks; a direct call gives the callee's return value. Op, Host, Construct, MakeClosure and
// indirect calls give Scatter, and so does every variable a constructor pattern binds (the fields
// of a data type are per-instance data). Host values end up Scatter as well.
//
// Algorithm:
//  1. Contexts. A function's parameters are the join of the argument vectors of its direct call
//     sites, plus an all-Scatter root context for a function that can be entered from outside:
//     one written in the user's file (Function::origin is User: not a lifted lambda, nor a copy
//     made by a pass), or one used as a value, @f or a closure (its indirect callers are unknown).
//  2. Solve: one monovariant fixpoint over the current module. A worklist of functions; evaluating
//     a body in order joins each direct call's arguments into the callee's parameters (queueing the
//     callee when they grow) and reads the callee's return value (a function whose return value
//     grows queues its callers). Every transfer is monotone and the lattice has finite height (a
//     tuple is as deep as its type), so the worklist empties.
//  3. Route. The key of a call site is its argument vector reduced to its Reuse/Indexed leaves
//     (everything else, Bottom included, is Scatter). Each original function o keeps a table
//     key -> version of o. With a root context the original is the version of the all-Scatter key;
//     without, it adopts the key of the first site routed to it. Another key gets a new clone
//     `o$k`, a copy of o, until o has options.max_clones_per_function clones; later keys share one
//     merged version (the original when o has a root context, else one more clone), whose
//     parameters are then a join. Every site is redirected to the version of its key. Only sites in
//     live functions (reachable from a root context) are routed, and only once their caller is
//     settled, i.e. every site calling the caller is already at the version of its key: keys are
//     then computed from the caller's final context, not from a join about to be split, so cloning
//     proceeds top-down
//     from the entries and makes no clone for a transient key. (Should every caller with an
//     unrouted site be unsettled, which takes a cycle of them, their sites are routed anyway;
//     clones made for such transient keys lose their callers later and go in step 5.)
//  4. Repeat 2-3 until no site moves and no version is made or adopted. A clone's body is a copy,
//     so its calls, recursive ones included, go where the original's went until a later round
//     routes them by their own keys: a recursion that passes its weights down finds its own clone's
//     key and stays there (f$1 calls f$1), one that alternates weights (even/odd depths) finds the
//     other clone.
//  5. Clones that no root context reaches any more (made for a caller that was split later) are
//     removed (the names of the others keep their k). A last solve on the final module gives the
//     origins: each function's parameters are the join over the contexts that remain; a tuple or an
//     unreached (Bottom) variable is reported as scatter. Each clone's record lists the call sites
//     that reach it.
//
// Termination: versions are made per (original, key), keys come from a finite set and the clones of
// an original are capped, so only finitely many functions are ever made; a round that moves no site
// ends the loop, as does one that only confirms routes. Sites could in principle keep moving
// between existing versions (a caller's context depends on where its callers were routed), so
// rounds are also capped (kMaxRounds); the final solve is a sound analysis of whatever module the
// rounds leave, so hitting the cap only costs precision.
//
// Limits: functions used as values keep an all-Scatter context for their indirect calls, and
// indirect calls (left by specialise_higher_order when the callee is unknown) return Scatter.
// Weights inside data types are Scatter. The originals of functions of the user's file stay, with
// their all-Scatter context, even when every call goes to a clone.
#include "analysis/reuse.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "ir/walk.h"
#include "support/diagnostics.h"

namespace acrobat::analysis {

using namespace ir;

const char* arg_mode_name(ArgMode mode) {
  switch (mode) {
    case ArgMode::Reuse: return "reuse";
    case ArgMode::Indexed: return "indexed";
    case ArgMode::Scatter: return "scatter";
  }
  return "?";
}

namespace {

constexpr int kMaxRounds = 100;

// An abstract value (see the lattice above).
struct Abs {
  enum Kind : uint8_t { Bottom, Reuse, Indexed, Scatter, Tuple };
  Kind kind = Bottom;
  int param = -1;           // Reuse, Indexed
  std::vector<Abs> fields;  // Tuple

  static Abs of(Kind kind, int param = -1) {
    Abs a;
    a.kind = kind;
    a.param = param;
    return a;
  }
  static Abs scatter() { return of(Scatter); }
  static Abs tuple(std::vector<Abs> fields) {
    Abs a = of(Tuple);
    a.fields = std::move(fields);
    return a;
  }

  friend bool operator==(const Abs& a, const Abs& b) {
    return a.kind == b.kind && a.param == b.param && a.fields == b.fields;
  }
  friend bool operator<(const Abs& a, const Abs& b) {
    return std::tie(a.kind, a.param, a.fields) < std::tie(b.kind, b.param, b.fields);
  }
};

Abs join(const Abs& a, const Abs& b) {
  if (a.kind == Abs::Bottom) return b;
  if (b.kind == Abs::Bottom) return a;
  if (a.kind == Abs::Tuple && b.kind == Abs::Tuple && a.fields.size() == b.fields.size()) {
    std::vector<Abs> fields;
    for (size_t i = 0; i < a.fields.size(); ++i) fields.push_back(join(a.fields[i], b.fields[i]));
    return Abs::tuple(std::move(fields));
  }
  if (a == b) return a;
  return Abs::scatter();
}

Abs field(const Abs& tuple, size_t i) {
  if (tuple.kind == Abs::Bottom) return tuple;
  if (tuple.kind == Abs::Tuple && i < tuple.fields.size()) return tuple.fields[i];
  return Abs::scatter();
}

// What a context is keyed by: only the Reuse and Indexed leaves matter.
Abs key_of(const Abs& v) {
  switch (v.kind) {
    case Abs::Reuse:
    case Abs::Indexed: return v;
    case Abs::Tuple: {
      std::vector<Abs> fields;
      bool any = false;
      for (const Abs& f : v.fields) {
        fields.push_back(key_of(f));
        any |= fields.back().kind != Abs::Scatter;
      }
      return any ? Abs::tuple(std::move(fields)) : Abs::scatter();
    }
    default: return Abs::scatter();
  }
}

using Key = std::vector<Abs>;

Origin origin_of(const Abs& v) {
  if (v.kind == Abs::Reuse) return Origin{ArgMode::Reuse, v.param};
  if (v.kind == Abs::Indexed) return Origin{ArgMode::Indexed, v.param};
  return Origin{};
}

// A direct call as the last solve saw it.
struct Site {
  int caller;
  const Rhs* rhs;  // identifies the site within its caller
  int callee;
  Key key;
};

class ReuseAnalysis {
 public:
  ReuseAnalysis(Module& m, const ReuseOptions& options) : m_(m), options_(options) {}

  ReuseInfo run() {
    init_versions();
    if (options_.clone) {
      for (int round = 0; round < kMaxRounds; ++round) {
        solve();
        if (!route_sites()) break;
      }
      solve();
      remove_dead_clones();
    }
    solve();
    return result();
  }

 private:
  // ---- versions ----

  void init_versions() {
    std::vector<char> used_as_value(m_.functions.size(), 0);
    for (const Function& f : m_.functions)
      for_each_block(f.body, [&](const Block& block) {
        auto mark = [&](const Atom& a) {
          if (a.kind == Atom::Func) used_as_value[a.func] = 1;
        };
        mark(block.result);
        for (const Binding& b : block.bindings) {
          for (const Atom& a : b.rhs->args) mark(a);
          mark(b.rhs->callee);
          if (b.rhs->kind == RhsKind::MakeClosure) used_as_value[b.rhs->callee_func] = 1;
        }
      });
    for (size_t f = 0; f < m_.functions.size(); ++f) {
      const Function& fn = m_.functions[f];
      bool entry = fn.origin.kind == FunctionOrigin::User;
      original_.push_back(static_cast<int>(f));
      root_.push_back(entry || used_as_value[f]);
      key_.emplace_back();
      record_of_.push_back(-1);
      if (root_[f]) {
        key_[f] = Key(fn.params.size(), Abs::scatter());
        versions_[static_cast<int>(f)][*key_[f]] = static_cast<int>(f);
      }
    }
  }

  // The version of `original` that serves `key` without making a new one; -1 if there is none.
  int lookup(int original, const Key& key) const {
    auto vs = versions_.find(original);
    if (vs != versions_.end()) {
      auto it = vs->second.find(key);
      if (it != vs->second.end()) return it->second;
    }
    if (adoptable(original)) return original;
    if (clone_count(original) < options_.max_clones_per_function) return -1;
    if (root_[original]) return original;
    auto merged = merged_.find(original);
    return merged != merged_.end() ? merged->second : -1;
  }

  // The version of `original` for `key`, adopting or cloning as step 3 says.
  int route(int original, const Key& key) {
    int found = lookup(original, key);
    if (found == original && adoptable(original)) {
      key_[original] = key;
      versions_[original][key] = original;
      versions_changed_ = true;
    }
    if (found >= 0) return found;
    versions_changed_ = true;
    if (clone_count(original) < options_.max_clones_per_function) {
      int clone = make_clone(original, key);
      versions_[original][key] = clone;
      ++clone_count_[original];
      return clone;
    }
    return merged_[original] = make_clone(original, std::nullopt);
  }

  bool adoptable(int f) const { return original_[f] == f && !root_[f] && !key_[f]; }

  int clone_count(int original) const {
    auto it = clone_count_.find(original);
    return it == clone_count_.end() ? 0 : it->second;
  }

  // A copy of `original` serving `key` (the merged version when there is no key).
  int make_clone(int original, const std::optional<Key>& key) {
    Function clone = m_.functions[original];
    clone.body = deep_copy(clone.body);
    clone.origin = FunctionOrigin{FunctionOrigin::Clone, original};
    int& n = name_count_[original];
    do {
      clone.name = m_.functions[original].name + "$" + std::to_string(++n);
    } while (m_.find_function(clone.name) >= 0);
    std::string reason =
        key ? describe(clone, *key)
            : "contexts beyond the first " + std::to_string(options_.max_clones_per_function) +
                  " clones, joined";
    record_of_.push_back(static_cast<int>(clones_.size()));
    clones_.push_back(CloneRecord{m_.functions[original].name, clone.name, reason, {}});
    original_.push_back(original);
    root_.push_back(0);
    key_.push_back(key);
    m_.functions.push_back(std::move(clone));
    return static_cast<int>(m_.functions.size()) - 1;
  }

  // "%W = @Wf_h, %b = @b_f": the weights a key fixes, by parameter name.
  std::string describe(const Function& f, const Key& key) const {
    std::string out;
    std::function<void(const std::string&, const Abs&)> leaf = [&](const std::string& name,
                                                                   const Abs& v) {
      if (v.kind == Abs::Tuple) {
        for (size_t i = 0; i < v.fields.size(); ++i)
          leaf(name + "." + std::to_string(i), v.fields[i]);
        return;
      }
      if (v.kind != Abs::Reuse && v.kind != Abs::Indexed) return;
      if (!out.empty()) out += ", ";
      out += name + " = @" + m_.params[v.param].name + (v.kind == Abs::Indexed ? "[...]" : "");
    };
    for (size_t i = 0; i < key.size() && i < f.params.size(); ++i) {
      std::string label = "%";  // as print_module names the variable
      const std::string& name = f.vars[f.params[i]].name;
      label += name.empty() ? std::to_string(f.params[i]) : name;
      leaf(label, key[i]);
    }
    return out.empty() ? "no weights (every argument scatter)" : out;
  }

  // ---- step 2: the monovariant fixpoint ----

  void solve() {
    size_t n = m_.functions.size();
    params_in_.assign(n, {});
    vals_.assign(n, {});
    ret_.assign(n, Abs{});
    callers_.assign(n, {});
    queued_.assign(n, 0);
    for (size_t f = 0; f < n; ++f) {
      params_in_[f].assign(m_.functions[f].params.size(), root_[f] ? Abs::scatter() : Abs{});
      std::set<int> callees;
      for_each_block(m_.functions[f].body, [&](const Block& block) {
        for (const Binding& b : block.bindings)
          if (b.rhs->kind == RhsKind::Call && b.rhs->callee_func >= 0)
            callees.insert(b.rhs->callee_func);
      });
      for (int g : callees) callers_[g].push_back(static_cast<int>(f));
    }
    for (size_t f = 0; f < n; ++f) enqueue(static_cast<int>(f));
    while (!queue_.empty()) {
      int f = queue_.front();
      queue_.pop_front();
      queued_[f] = 0;
      evaluate(f, false);
    }
    // Converged: one more evaluation of each function records its call sites.
    sites_.clear();
    for (size_t f = 0; f < n; ++f) evaluate(static_cast<int>(f), true);
  }

  void enqueue(int f) {
    if (queued_[f]) return;
    queued_[f] = 1;
    queue_.push_back(f);
  }

  void evaluate(int f, bool record) {
    const Function& fn = m_.functions[f];
    std::vector<Abs>& vals = vals_[f];
    vals.assign(fn.vars.size(), Abs{});
    for (size_t i = 0; i < fn.params.size(); ++i) vals[fn.params[i]] = params_in_[f][i];
    Abs joined = join(ret_[f], block(fn.body, f, record));
    if (joined == ret_[f]) return;
    ret_[f] = std::move(joined);
    for (int caller : callers_[f]) enqueue(caller);
  }

  Abs block(const Block& b, int f, bool record) {
    for (const Binding& bind : b.bindings) vals_[f][bind.var] = rhs(*bind.rhs, f, record);
    return atom(b.result, f);
  }

  Abs atom(const Atom& a, int f) const {
    return a.kind == Atom::Var ? vals_[f][a.var] : Abs::scatter();
  }

  Abs rhs(const Rhs& r, int f, bool record) {
    switch (r.kind) {
      case RhsKind::Copy: return atom(r.args[0], f);
      case RhsKind::ParamLoad: return Abs::of(Abs::Reuse, r.index);
      case RhsKind::ParamIndex: return Abs::of(Abs::Indexed, r.index);
      case RhsKind::MakeTuple: {
        std::vector<Abs> fields;
        for (const Atom& a : r.args) fields.push_back(atom(a, f));
        return Abs::tuple(std::move(fields));
      }
      case RhsKind::Proj: return field(atom(r.args[0], f), r.index);
      case RhsKind::Call: return call(r, f, record);
      case RhsKind::If: {
        Abs t = block(r.then_block, f, record);
        return join(t, block(r.else_block, f, record));
      }
      case RhsKind::Match: {
        Abs scrutinee = atom(r.args[0], f);
        Abs result;
        for (const Clause& c : r.clauses) {
          bind(*c.pattern, scrutinee, f);
          result = join(result, block(c.body, f, record));
        }
        return result;
      }
      case RhsKind::Op:
      case RhsKind::Host:
      case RhsKind::Construct:
      case RhsKind::ParamGather:  // rows copied per instance
      case RhsKind::MakeClosure: return Abs::scatter();
    }
    return Abs::scatter();
  }

  Abs call(const Rhs& r, int f, bool record) {
    if (r.callee_func < 0) return Abs::scatter();  // the callees have their root contexts
    int g = r.callee_func;
    std::vector<Abs>& in = params_in_[g];
    ACROBAT_ASSERT(in.size() == r.args.size(), "call of " + m_.functions[g].name + " with " +
                                                   std::to_string(r.args.size()) + " arguments");
    Key key;
    bool grew = false;
    for (size_t i = 0; i < r.args.size(); ++i) {
      Abs arg = atom(r.args[i], f);
      Abs joined = join(in[i], arg);
      if (!(joined == in[i])) {
        in[i] = std::move(joined);
        grew = true;
      }
      key.push_back(key_of(arg));
    }
    if (grew) enqueue(g);
    if (record) sites_.push_back(Site{f, &r, g, std::move(key)});
    return ret_[g];
  }

  void bind(const Pattern& p, const Abs& v, int f) {
    switch (p.kind) {
      case Pattern::Wildcard: return;
      case Pattern::Bind: vals_[f][p.var] = v; return;
      case Pattern::Tuple:
        for (size_t i = 0; i < p.subs.size(); ++i) bind(*p.subs[i], field(v, i), f);
        return;
      case Pattern::Ctor:
        for (const PatternPtr& sub : p.subs) bind(*sub, Abs::scatter(), f);
        return;
    }
  }

  // ---- step 3 ----

  // Functions reachable from a root context through the current call sites.
  std::vector<char> live_functions() const {
    std::vector<char> live(m_.functions.size(), 0);
    std::vector<std::vector<int>> callees(m_.functions.size());
    for (const Site& s : sites_) callees[s.caller].push_back(s.callee);
    std::vector<int> stack;
    for (size_t f = 0; f < live.size(); ++f)
      if (root_[f]) {
        live[f] = 1;
        stack.push_back(static_cast<int>(f));
      }
    while (!stack.empty()) {
      int f = stack.back();
      stack.pop_back();
      for (int g : callees[f])
        if (!live[g]) {
          live[g] = 1;
          stack.push_back(g);
        }
    }
    return live;
  }

  // Redirects call sites to the versions of their keys; returns whether anything changed.
  bool route_sites() {
    std::vector<char> live = live_functions();
    // A function is settled when every live site calling it is at the version of its key; sites
    // calling a function that has yet to adopt a key must agree on one.
    std::vector<char> settled = live;
    std::map<int, const Key*> adopting;
    for (const Site& s : sites_) {
      if (!live[s.caller]) continue;
      if (lookup(original_[s.callee], s.key) != s.callee) settled[s.callee] = 0;
      if (adoptable(s.callee)) {
        auto [it, first] = adopting.emplace(s.callee, &s.key);
        if (!first && !(*it->second == s.key)) settled[s.callee] = 0;
      }
    }

    std::map<int, std::map<const Rhs*, int>> moves;  // caller -> site -> new callee
    versions_changed_ = false;
    auto route_all = [&](bool settled_callers_only) {
      for (const Site& s : sites_) {
        if (!live[s.caller] || (settled_callers_only && !settled[s.caller])) continue;
        int target = route(original_[s.callee], s.key);
        if (target != s.callee) moves[s.caller][s.rhs] = target;
      }
    };
    route_all(true);
    if (moves.empty() && !versions_changed_) route_all(false);

    for (auto& [caller, site_targets] : moves) {
      const auto& targets = site_targets;  // a lambda may not capture a structured binding (clang 14)
      Block body = m_.functions[caller].body;
      rewrite_rhs(body, [&](const Rhs& r) -> RhsPtr {
        auto it = targets.find(&r);
        if (it == targets.end()) return nullptr;
        auto moved = std::make_shared<Rhs>(r);
        moved->callee_func = it->second;
        return moved;
      });
      m_.functions[caller].body = std::move(body);
    }
    return !moves.empty() || versions_changed_;
  }

  // Clones no root context reaches any more (their callers were split after them) are dropped.
  // Clones come after every original and are only ever direct callees, so only call targets need
  // renumbering; a dropped clone still named by a dead function is replaced by its original.
  void remove_dead_clones() {
    std::vector<char> live = live_functions();
    size_t n = m_.functions.size();
    std::vector<int> index(n, -1);
    int kept = 0;
    for (size_t f = 0; f < n; ++f)
      if (original_[f] == static_cast<int>(f) || live[f]) index[f] = kept++;
    if (static_cast<size_t>(kept) == n) return;

    for (size_t f = 0; f < n; ++f) {
      if (index[f] < 0) continue;
      Block body = m_.functions[f].body;
      bool changed = rewrite_rhs(body, [&](const Rhs& r) -> RhsPtr {
        if (r.kind != RhsKind::Call || r.callee_func < 0) return nullptr;
        int callee = r.callee_func;
        int target = index[callee] >= 0 ? index[callee] : index[original_[callee]];
        if (target == r.callee_func) return nullptr;
        auto moved = std::make_shared<Rhs>(r);
        moved->callee_func = target;
        return moved;
      });
      if (changed) m_.functions[f].body = std::move(body);
    }
    std::vector<Function> functions;
    std::vector<CloneRecord> clones;
    std::vector<int> original, record_of;
    std::vector<char> root;
    std::vector<std::optional<Key>> key;
    for (size_t f = 0; f < n; ++f) {
      if (index[f] < 0) continue;
      functions.push_back(std::move(m_.functions[f]));
      original.push_back(original_[f]);  // originals keep their indices
      root.push_back(root_[f]);
      key.push_back(key_[f]);
      record_of.push_back(record_of_[f] < 0 ? -1 : static_cast<int>(clones.size()));
      if (record_of_[f] >= 0) clones.push_back(std::move(clones_[record_of_[f]]));
    }
    m_.functions = std::move(functions);
    clones_ = std::move(clones);
    original_ = std::move(original);
    root_ = std::move(root);
    key_ = std::move(key);
    record_of_ = std::move(record_of);
    versions_.clear();  // no more routing
  }

  // ---- step 5 ----

  ReuseInfo result() {
    ReuseInfo info;
    for (size_t f = 0; f < m_.functions.size(); ++f) {
      std::vector<Origin> origins;
      for (const Abs& v : vals_[f]) origins.push_back(origin_of(v));
      info.origins.push_back(std::move(origins));
    }
    std::vector<char> live = live_functions();
    for (const Site& s : sites_) {
      int record = record_of_[s.callee];
      if (record < 0 || !live[s.caller]) continue;
      std::string where = s.rhs->span.begin.str();
      auto& sites = clones_[record].call_sites;
      if (std::find(sites.begin(), sites.end(), where) == sites.end()) sites.push_back(where);
    }
    info.clones = std::move(clones_);
    return info;
  }

  Module& m_;
  ReuseOptions options_;

  // Per function of the module (clones appended).
  std::vector<int> original_;            // what a version was cloned from (itself for originals)
  std::vector<char> root_;               // has the all-Scatter root context
  std::vector<std::optional<Key>> key_;  // the key a version serves (none: not adopted, or merged)
  std::vector<int> record_of_;           // index into clones_, -1 for originals
  // Per original function.
  std::map<int, std::map<Key, int>> versions_;  // key -> version
  std::map<int, int> clone_count_;              // clones made for keys
  std::map<int, int> merged_;                   // the merged clone
  std::map<int, int> name_count_;               // last k used in `name$k`
  std::vector<CloneRecord> clones_;
  bool versions_changed_ = false;  // this round adopted a key or made a version

  // The current solve.
  std::vector<std::vector<Abs>> params_in_;  // [function][param]: join of the contexts
  std::vector<std::vector<Abs>> vals_;       // [function][var]
  std::vector<Abs> ret_;
  std::vector<std::vector<int>> callers_;
  std::deque<int> queue_;
  std::vector<char> queued_;
  std::vector<Site> sites_;
};

}  // namespace

Reused analyse_param_reuse(ir::Module module, const ReuseOptions& options) {
  ReuseInfo info = ReuseAnalysis(module, options).run();
  ir::number_new_sites(module);  // the clones
  return {std::move(module), std::move(info)};
}

}  // namespace acrobat::analysis
