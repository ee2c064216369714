// Depth and phase analysis.
//
// Algorithm:
//  1. Call graph over direct calls and function references (a function passed as a value or
//     closed over may be called from where it goes). Tarjan's algorithm finds the strongly connected
//     components; a function is recursive when its component has a cycle. A function is unbounded
//     when it is recursive, calls through a closure, or calls an unbounded function (a fixpoint over
//     the graph). A function is in recursion when it is reachable from a recursive function.
//  2. Phases: in every function not in recursion, each call of an unbounded function (or through a
//     closure) ends a phase. Restricting this to code no recursion reaches keeps phases from cutting
//     a recursion's independent calls apart (a phase boundary inside a tree recursion would order
//     the subtrees one after the other).
//  3. Chain lengths. d(v), the number of blocks on the longest dependency chain ending at variable v,
//     is computed by one walk of a function body: parameters and free variables count 0, a static
//     block's outputs 1 + the largest d of its arguments, a call d(args) + the callee's chain length,
//     an if or match the largest of its branches; anything after an unbounded call is unbounded.
//     A function's chain length is d of its result. Callees are walked first (memoised; recursive
//     functions are unbounded and need no walk).
//  4. Ghosts. For every if and match, each branch is walked on its own with its free variables at 0,
//     giving the chain it adds; when all branches are bounded and differ, branch b is padded by
//     (longest - its own). The padding only ever makes a value count deeper than it is, so the
//     schedule still runs every block after the blocks it reads.
#include "analysis/depth.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "ir/walk.h"

namespace acrobat::analysis {

namespace {

constexpr int kUnbounded = 1 << 29;
// Ghost padding per branch is capped: each level is a bucket row the schedule walks, and a recursion
// through such a branch adds the padding once per step. Past the cap, the work after the branch
// lines up less well across instances (still correct: padding only ever places a node later).
constexpr int kMaxGhostLevels = 256;
int add_depth(int a, int b) { return (a >= kUnbounded || b >= kUnbounded) ? kUnbounded : a + b; }

// Calls f on every right-hand side of `b`, nested blocks included.
template <class F>
void for_each_rhs(const ir::Block& b, F&& f) {
  ir::for_each_block(b, [&](const ir::Block& block) {
    for (const auto& bind : block.bindings) f(*bind.rhs);
  });
}

class DepthAnalysis {
 public:
  DepthAnalysis(const ir::Module& m, const std::vector<StaticBlock>& blocks, const DepthOptions& o)
      : m_(m), options_(o) {
    for (const auto& s : blocks) block_at_[s.block->bindings[s.begin].rhs->site] = &s;
  }

  DepthPlan run() {
    size_t n = m_.functions.size();
    edges_.resize(n);
    indirect_.assign(n, false);
    for (size_t f = 0; f < n; ++f) {
      auto add_ref = [&](const ir::Atom& a) {
        if (a.kind == ir::Atom::Func) edges_[f].push_back(a.func);
      };
      for_each_rhs(m_.functions[f].body, [&](const ir::Rhs& r) {
        if (r.kind == ir::RhsKind::Call && r.callee_func >= 0) edges_[f].push_back(r.callee_func);
        if (r.kind == ir::RhsKind::Call && r.callee_func < 0) indirect_[f] = true;
        if (r.kind == ir::RhsKind::MakeClosure) edges_[f].push_back(r.callee_func);
        for (const auto& a : r.args) add_ref(a);
        add_ref(r.callee);
      });
      add_ref(m_.functions[f].body.result);
    }
    find_recursion();
    plan_.chain_length.assign(n, -2);  // -2: not computed yet
    for (size_t f = 0; f < n; ++f) chain_of(static_cast<int>(f));
    for (size_t f = 0; f < n; ++f) {
      std::vector<int> d(m_.functions[f].vars.size(), 0);
      func_ = static_cast<int>(f);
      walk(m_.functions[f].body, d, /*ghosts=*/true);
    }
    if (options_.phases)
      for (size_t f = 0; f < n; ++f) {
        if (plan_.in_recursion[f]) continue;
        for_each_rhs(m_.functions[f].body, [&](const ir::Rhs& r) {
          if (r.kind != ir::RhsKind::Call) return;
          if (r.callee_func < 0 || unbounded_[r.callee_func]) plan_.phase_ends.insert(r.site);
        });
      }
    return std::move(plan_);
  }

 private:
  void find_recursion() {
    size_t n = m_.functions.size();
    std::vector<int> index(n, -1), low(n, 0), stack;
    std::vector<bool> on_stack(n, false);
    recursive_.assign(n, false);
    int counter = 0;
    std::function<void(int)> connect = [&](int v) {
      index[v] = low[v] = counter++;
      stack.push_back(v);
      on_stack[v] = true;
      for (int w : edges_[v]) {
        if (w == v) recursive_[v] = true;
        if (index[w] < 0) {
          connect(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
      }
      if (low[v] != index[v]) return;
      std::vector<int> component;
      int w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = false;
        component.push_back(w);
      } while (w != v);
      if (component.size() > 1)
        for (int c : component) recursive_[c] = true;
    };
    for (size_t f = 0; f < n; ++f)
      if (index[f] < 0) connect(static_cast<int>(f));

    unbounded_.resize(n);
    for (size_t f = 0; f < n; ++f) unbounded_[f] = recursive_[f] || indirect_[f];
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t f = 0; f < n; ++f)
        for (int g : edges_[f])
          if (unbounded_[g] && !unbounded_[f]) unbounded_[f] = changed = true;
    }
    plan_.in_recursion.assign(n, false);
    std::vector<int> work;
    for (size_t f = 0; f < n; ++f)
      if (recursive_[f]) work.push_back(static_cast<int>(f));
    while (!work.empty()) {
      int f = work.back();
      work.pop_back();
      if (plan_.in_recursion[f]) continue;
      plan_.in_recursion[f] = true;
      for (int g : edges_[f]) work.push_back(g);
    }
  }

  int chain_of(int f) {
    int& c = plan_.chain_length[f];
    if (c != -2) return c;
    if (unbounded_[f]) return c = -1;
    c = -1;  // guards against a cycle (none: bounded functions form a DAG)
    c = eval_function(f);
    return c;
  }

  int eval_function(int f) {
    std::vector<int> d(m_.functions[f].vars.size(), 0);
    int saved = func_;
    func_ = f;
    int len = walk(m_.functions[f].body, d, /*ghosts=*/false);
    func_ = saved;
    return len >= kUnbounded ? -1 : len;
  }

  static int value(const ir::Atom& a, const std::vector<int>& d) {
    return a.kind == ir::Atom::Var ? d[a.var] : 0;
  }
  static int max_of(const std::vector<ir::Atom>& as, const std::vector<int>& d) {
    int m = 0;
    for (const auto& a : as) m = std::max(m, value(a, d));
    return m;
  }

  // Walks `b` updating d; returns d of its result. With `ghosts`, records the padding of every if
  // and match met.
  int walk(const ir::Block& b, std::vector<int>& d, bool ghosts) {
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Binding& bind = b.bindings[i];
      const ir::Rhs& r = *bind.rhs;
      auto blk = block_at_.find(r.site);
      if (blk != block_at_.end()) {
        const StaticBlock& s = *blk->second;
        int in = 0;
        for (const auto& a : s.args) in = std::max(in, d[a.var]);
        int out = add_depth(in, 1);
        for (size_t k = s.begin; k < s.end; ++k) {
          const ir::Binding& kb = b.bindings[k];
          d[kb.var] = is_batched_op(*kb.rhs) ? out : host_value(*kb.rhs, d);
        }
        i = s.end;
        continue;
      }
      switch (r.kind) {
        case ir::RhsKind::Call: {
          int callee = r.callee_func >= 0 ? chain_of(r.callee_func) : -1;
          int in = std::max(max_of(r.args, d), value(r.callee, d));
          d[bind.var] = callee < 0 ? kUnbounded : add_depth(in, callee);
          break;
        }
        case ir::RhsKind::If:
        case ir::RhsKind::Match: {
          std::vector<const ir::Block*> branches;
          if (r.kind == ir::RhsKind::If) {
            branches = {&r.then_block, &r.else_block};
          } else {
            for (const auto& c : r.clauses) branches.push_back(&c.body);
          }
          int scrutinee = value(r.args[0], d);
          int result = 0;
          for (const ir::Block* br : branches) {
            if (r.kind == ir::RhsKind::Match) set_pattern_vars(r, scrutinee, d);
            result = std::max(result, walk(*br, d, ghosts));
          }
          d[bind.var] = result;
          if (ghosts && options_.ghosts) record_ghosts(r, branches);
          break;
        }
        default: d[bind.var] = host_value(r, d); break;
      }
      ++i;
    }
    return value(b.result, d);
  }

  static void set_pattern_vars(const ir::Rhs& r, int depth, std::vector<int>& d) {
    std::function<void(const ir::Pattern&)> set = [&](const ir::Pattern& p) {
      if (p.kind == ir::Pattern::Bind) d[p.var] = depth;
      for (const auto& s : p.subs) set(*s);
    };
    for (const auto& c : r.clauses) set(*c.pattern);
  }

  static int host_value(const ir::Rhs& r, const std::vector<int>& d) {
    switch (r.kind) {
      case ir::RhsKind::Copy:
      case ir::RhsKind::MakeTuple:
      case ir::RhsKind::Proj:
      case ir::RhsKind::Construct:
      case ir::RhsKind::MakeClosure: return max_of(r.args, d);
      default: return 0;  // parameters, host scalars, constants, tensor-to-host reads
    }
  }

  // The chain each branch adds on its own (free variables at 0); pads the shorter ones.
  void record_ghosts(const ir::Rhs& r, const std::vector<const ir::Block*>& branches) {
    std::vector<int> lengths;
    for (const ir::Block* br : branches) {
      std::vector<int> zero(m_.functions[func_].vars.size(), 0);
      int len = walk(*br, zero, /*ghosts=*/false);
      if (len >= kUnbounded) return;
      lengths.push_back(len);
    }
    int longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<int> pads;
    bool any = false;
    for (int len : lengths) {
      pads.push_back(std::min(longest - len, kMaxGhostLevels));
      any = any || longest != len;
    }
    if (any) plan_.ghosts[r.site] = std::move(pads);
  }

  const ir::Module& m_;
  DepthOptions options_;
  std::unordered_map<int, const StaticBlock*> block_at_;  // by the site of its first binding
  std::vector<std::vector<int>> edges_;
  std::vector<bool> indirect_, recursive_, unbounded_;
  DepthPlan plan_;
  int func_ = 0;
};

}  // namespace

DepthPlan analyse_depth(const ir::Module& module, const std::vector<StaticBlock>& blocks,
                        const DepthOptions& options) {
  return DepthAnalysis(module, blocks, options).run();
}

std::string depth_summary(const DepthPlan& plan, int function) {
  int chain = plan.chain_length[function];
  std::string out = chain < 0 ? "  (unbounded"
                              : fmt::format("  (chain of {} block{}", chain, chain == 1 ? "" : "s");
  return out + (plan.in_recursion[function] ? ", in recursion)" : ", top level)");
}

std::string ghost_line(const DepthPlan& plan, const ir::Rhs& r) {
  auto g = plan.ghosts.find(r.site);
  if (g == plan.ghosts.end()) return "";
  std::vector<std::string> pads;
  for (int p : g->second) pads.push_back(fmt::format("+{}", p));
  return fmt::format("  {} at {}: ghost operations per branch {}\n",
                     r.kind == ir::RhsKind::If ? "if" : "match", r.span.begin.str(),
                     fmt::join(pads, " "));
}

std::string phase_end_line(const ir::Module& module, const DepthPlan& plan, const ir::Rhs& r,
                           int& phase) {
  if (!plan.ends_phase(r)) return "";
  std::string callee =
      r.callee_func >= 0 ? "@" + module.functions[r.callee_func].name : "a closure";
  return fmt::format("  call of {} at {} ends phase {}\n", callee, r.span.begin.str(), phase++);
}

std::string depth_plan_str(const ir::Module& module, const DepthPlan& plan) {
  std::string out;
  int phase = 0;
  // Nested blocks are listed where they sit: an if's padding before its branches, a call's phase
  // end after the work it waits for.
  std::function<void(const ir::Block&)> walk = [&](const ir::Block& b) {
    for (const ir::Binding& bind : b.bindings) {
      const ir::Rhs& r = *bind.rhs;
      out += ghost_line(plan, r);
      for (const ir::Block* nested : {&r.then_block, &r.else_block}) walk(*nested);
      for (const auto& c : r.clauses) walk(c.body);
      out += phase_end_line(module, plan, r, phase);
    }
  };
  for (size_t f = 0; f < module.functions.size(); ++f) {
    out += fmt::format("{}function @{}{}\n", f ? "\n" : "", module.functions[f].name,
                       depth_summary(plan, static_cast<int>(f)));
    phase = 0;
    walk(module.functions[f].body);
  }
  return out;
}

}  // namespace acrobat::analysis
