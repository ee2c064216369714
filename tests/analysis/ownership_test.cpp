// Ownership of lazy tensors (analysis/ownership.h): golden listings of where the host program dups
// and drops (`acrobat emit ownership`), the decisions that matter for BERxiT and DRNN stated
// directly, and an independent check of the plan on every model and analysis switch: along every
// path each owned variable holds one reference from its definition until exactly one move or drop
// gives it up, nothing reads a variable whose reference is gone, and no member of a group of
// concurrent calls gives up what another member reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "analysis/plan.h"
#include "compiler/pipeline.h"
#include "ir/walk.h"

namespace acrobat::analysis {
namespace {

std::string source(const std::string& relative) {
  return std::string(ACROBAT_SOURCE_DIR) + "/" + relative;
}

std::shared_ptr<const ir::Module> compile_file(const std::string& path, AnalysisOptions a = {}) {
  CompileOptions o;
  o.analysis = a;
  return compile_model(path, o);
}

// ---- golden listings ----

void expect_golden(const std::string& relative, const std::string& listing) {
  std::string golden = source("tests/golden/" + relative);
  const char* update = std::getenv("ACROBAT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(golden, std::ios::binary) << listing;
    GTEST_SKIP() << "rewrote " << golden;
  }
  std::ifstream in(golden, std::ios::binary);
  ASSERT_TRUE(in) << golden << " is missing; create it with ACROBAT_UPDATE_GOLDEN=1";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(listing, expected.str()) << "the ownership listing of " << relative
                                     << " changed; if intended, regenerate with "
                                        "ACROBAT_UPDATE_GOLDEN=1 and review the diff";
}

TEST(Ownership, GoldenListings) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tests/golden/ownership/ownership.acr", "ownership/ownership.txt"},
      {"tests/golden/generic_pair.acr", "ownership/generic_pair.txt"},
      {"models/berxit_padded.acr", "ownership/berxit_padded.txt"},
      {"models/berxit.acr", "ownership/berxit.txt"},
      {"models/drnn.acr", "ownership/drnn.txt"},
  };
  for (const auto& [model, golden] : cases) {
    SCOPED_TRACE(model);
    expect_golden(golden, ownership_str(*compile_file(source(model))));
  }
}

// ---- the decisions, stated directly ----

struct Actions {
  const ir::Module& m;
  const OwnershipPlan& own;
  int func;
  std::vector<std::string> names(VarList l) const {
    std::vector<std::string> out;
    for (const int32_t* v = own.begin(l); v != own.end(l); ++v)
      out.push_back(m.functions[func].vars[*v].name);
    return out;
  }
};

// The binding of `func` whose right-hand side satisfies `pred` (the first, in program order).
const ir::Rhs* find(const ir::Module& m, int func, const std::function<bool(const ir::Rhs&)>& pred) {
  const ir::Rhs* out = nullptr;
  ir::for_each_block(m.functions[func].body, [&](const ir::Block& b) {
    for (const auto& bind : b.bindings)
      if (!out && pred(*bind.rhs)) out = bind.rhs.get();
  });
  return out;
}

using Names = std::vector<std::string>;

// BERxiT: each head borrows the layer input through a dup; the accumulator dies in the add; the
// last head drops the layer input on entry to its branch; the loop over heads moves everything.
TEST(Ownership, BerxitHeadsReleaseTheAccumulator) {
  auto m = compile_file(source("models/berxit_padded.acr"));
  const OwnershipPlan& own = m->plan->ownership;
  const int heads = m->find_function("head_sum"), head = m->find_function("head");
  ASSERT_GE(heads, 0);
  Actions a{*m, own, heads};
  const ir::Rhs* call_head = find(*m, heads, [&](const ir::Rhs& r) {
    return r.kind == ir::RhsKind::Call && r.callee_func == head;
  });
  ASSERT_TRUE(call_head);
  EXPECT_EQ(a.names(own.dups[call_head->site]), (Names{"x", "mask"}));
  EXPECT_TRUE(own.drops[call_head->site].empty());
  const ir::Rhs* add = find(*m, heads, [](const ir::Rhs& r) { return r.kind == ir::RhsKind::Op; });
  ASSERT_TRUE(add && m->plan->block_at(*add));
  EXPECT_EQ(a.names(own.drops[add->site]), (Names{"acc", ""}));  // acc and head's result
  const ir::Rhs* branch = find(*m, heads, [](const ir::Rhs& r) { return r.kind == ir::RhsKind::If; });
  ASSERT_TRUE(branch);
  EXPECT_EQ(a.names(own.branch(*branch, 0).drops), (Names{"x", "mask"}));
  EXPECT_TRUE(own.branch(*branch, 1).drops.empty());
  const ir::Rhs* loop = find(*m, heads, [&](const ir::Rhs& r) { return m->plan->is_tail_call(r); });
  ASSERT_TRUE(loop);
  EXPECT_TRUE(own.dups[loop->site].empty());
  EXPECT_TRUE(own.drops[loop->site].empty());
  // The block's output is the host's once recorded; head's attention intermediates are not.
  const StaticBlock& acc_block = *m->plan->block_at(*add);
  EXPECT_EQ(own.owned_outputs[acc_block.id], (std::vector<uint8_t>{1}));
  const ir::Rhs* head_block = find(*m, head, [&](const ir::Rhs& r) { return m->plan->block_at(r) != nullptr; });
  const StaticBlock& h = *m->plan->block_at(*head_block);
  int owned = 0;
  for (uint8_t o : own.owned_outputs[h.id]) owned += o;
  EXPECT_EQ(owned, 1);
  EXPECT_EQ(own.owned_outputs[h.id].back(), 1);
}

// DRNN: the tree's two growing calls run concurrently; what only one of them reads is dropped
// after both have finished, and each member hands its arguments over with dups.
TEST(Ownership, ConcurrentGroupsDropAfterTheJoin) {
  auto m = compile_file(source("models/drnn.acr"));
  const OwnershipPlan& own = m->plan->ownership;
  const int grow = m->find_function("grow");
  Actions a{*m, own, grow};
  std::vector<const ir::Rhs*> starts;
  ir::for_each_block(m->functions[grow].body, [&](const ir::Block& b) {
    for (const auto& bind : b.bindings)
      if (m->plan->concurrency.group_at(*bind.rhs)) starts.push_back(bind.rhs.get());
  });
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_TRUE(own.drops[starts[0]->site].empty());  // h is read after the first group
  EXPECT_EQ(a.names(own.drops[starts[1]->site]), (Names{"parent"}));
  const ir::Rhs* sibling = find(*m, grow, [&](const ir::Rhs& r) {
    return r.kind == ir::RhsKind::Call && r.callee_func == grow && !r.args.empty() &&
           r.args[0].kind == ir::Atom::Var && m->functions[grow].vars[r.args[0].var].name == "parent";
  });
  ASSERT_TRUE(sibling);
  EXPECT_EQ(a.names(own.dups[sibling->site]), (Names{"parent", "h"}));
}

TEST(Ownership, OffWithTheReleaseSwitch) {
  AnalysisOptions off;
  off.release = false;
  auto m = compile_file(source("models/berxit_padded.acr"), off);
  EXPECT_FALSE(m->plan->ownership.enabled);
  EXPECT_EQ(ownership_str(*m), ir::print_module(*m));
}

// ---- the invariant, checked on every model ----

class Checker {
 public:
  Checker(const ir::Module& m, int func) : m_(m), plan_(*m.plan), own_(m.plan->ownership), func_(func) {
    const ir::Function& f = m.functions[func];
    state_.assign(f.vars.size(), State::Undefined);
    borrowed_.assign(f.vars.size(), false);
    ir::for_each_block(f.body, [&](const ir::Block& b) {
      for (const auto& bind : b.bindings) {
        if (bind.rhs->kind == ir::RhsKind::Proj) borrowed_[bind.var] = true;
        for (const auto& c : bind.rhs->clauses) mark_pattern(*c.pattern);
      }
    });
  }

  std::string run() {
    const ir::Function& f = m_.functions[func_];
    for (int p : f.params) define(p);
    block(f.body, own_.bodies[func_]);
    for (int p : f.params)
      if (owned(p) && state_[p] == State::Holds) fail(name(p) + " never given up");
    return error_;
  }

 private:
  enum class State { Undefined, Holds, Gone };

  bool owned(int v) const { return own_.tracked[func_][v] && !borrowed_[v]; }
  std::string name(int v) const { return ir::var_str(m_.functions[func_], v); }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = "@" + m_.functions[func_].name + ": " + what;
  }

  void mark_pattern(const ir::Pattern& p) {
    if (p.kind == ir::Pattern::Bind) borrowed_[p.var] = true;
    for (const auto& s : p.subs) mark_pattern(*s);
  }

  void define(int v) {
    if (owned(v)) state_[v] = State::Holds;
  }
  void read(int v, const char* how) {
    if (owned(v) && state_[v] != State::Holds) fail(name(v) + " " + how + " without its reference");
  }
  void give_up(int v, const char* how) {
    if (!owned(v)) return fail(std::string(how) + " of " + name(v) + ", which owns nothing");
    read(v, how);
    state_[v] = State::Gone;
    if (guarded_.count(v)) fail(name(v) + " given up inside a group while another member reads it");
  }
  int count(VarList l, int v) const {
    int n = 0;
    for (const int32_t* p = own_.begin(l); p != own_.end(l); ++p) n += *p == v;
    return n;
  }
  // Owned uses of the arguments `args`, `dups` of them dups: each variable moves at most once.
  void hand_over(const std::vector<const ir::Atom*>& args, VarList dups) {
    std::map<int, int> uses;
    for (const ir::Atom* a : args)
      if (a->kind == ir::Atom::Var && own_.tracked[func_][a->var]) uses[a->var]++;
    for (auto [v, n] : uses) {
      const int moves = n - count(dups, v);
      read(v, "handed over");
      if (moves < 0 || moves > 1 || (moves == 1 && !owned(v)))
        fail(name(v) + ": " + std::to_string(n) + " owned uses with " + std::to_string(count(dups, v)) +
             " dups");
      else if (moves == 1)
        give_up(v, "move");
    }
  }
  void drops(VarList l) {
    for (const int32_t* v = own_.begin(l); v != own_.end(l); ++v) give_up(*v, "drop");
  }

  static bool hands_over(const ir::Rhs& r) {
    return r.kind == ir::RhsKind::Copy || r.kind == ir::RhsKind::Call || r.kind == ir::RhsKind::Construct ||
           r.kind == ir::RhsKind::MakeTuple || r.kind == ir::RhsKind::MakeClosure;
  }

  void block(const ir::Block& b, const BlockOwnership& self) {
    drops(self.drops);
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      if (const StaticBlock* s = plan_.block_at(r)) {
        static_block(b, *s);
        i = s->end;
      } else if (int n = plan_.concurrency.group_at(r)) {
        group(b, i, static_cast<size_t>(n));
        i += static_cast<size_t>(n);
      } else {
        binding(b.bindings[i], true);
        ++i;
      }
    }
    if (b.result.kind == ir::Atom::Var && own_.tracked[func_][b.result.var]) {
      read(b.result.var, "returned");
      if (!self.dup_result) give_up(b.result.var, "move");
    } else if (self.dup_result) {
      fail("a dup of a result that holds no tensor");
    }
    // Everything the block defined has given its reference up.
    for (const auto& bind : b.bindings)
      if (owned(bind.var) && state_[bind.var] == State::Holds) fail(name(bind.var) + " never given up");
  }

  void binding(const ir::Binding& bind, bool with_drops) {
    const ir::Rhs& r = *bind.rhs;
    if (hands_over(r)) {
      std::vector<const ir::Atom*> args;
      for (const auto& a : r.args) args.push_back(&a);
      hand_over(args, own_.dups[r.site]);
    } else if (!own_.dups[r.site].empty()) {
      fail("dups at a binding that hands nothing over");
    }
    if ((r.kind == ir::RhsKind::Op || r.kind == ir::RhsKind::Match) && r.args[0].kind == ir::Atom::Var)
      read(r.args[0].var, "read");
    if (r.kind == ir::RhsKind::If || r.kind == ir::RhsKind::Match) {
      const size_t n = r.kind == ir::RhsKind::If ? 2 : r.clauses.size();
      std::vector<State> before = state_, after;
      for (size_t c = 0; c < n; ++c) {
        state_ = before;
        if (r.kind == ir::RhsKind::If)
          block(c == 0 ? r.then_block : r.else_block, own_.branch(r, c));
        else
          block(r.clauses[c].body, own_.branch(r, c));
        if (c == 0) {
          after = state_;
        } else {
          for (size_t v = 0; v < after.size(); ++v)
            if (before[v] == State::Holds && after[v] != state_[v])
              fail("branches of " + std::to_string(r.site) + " disagree about " + name(static_cast<int>(v)));
        }
      }
      // Variables defined inside the branches are done with; the rest agree.
      for (size_t v = 0; v < after.size(); ++v)
        if (before[v] != State::Undefined) before[v] = after[v];
      state_ = before;
    }
    define(bind.var);
    if (with_drops) drops(own_.drops[r.site]);
  }

  void static_block(const ir::Block& b, const StaticBlock& s) {
    std::set<int> defined;
    for (size_t i = s.begin; i < s.end; ++i) defined.insert(b.bindings[i].var);
    for (size_t i = s.begin; i < s.end; ++i)
      for (const auto& a : b.bindings[i].rhs->args)
        if (a.kind == ir::Atom::Var && !defined.count(a.var)) read(a.var, "read by a static block");
    for (size_t k = 0; k < s.ops.size(); ++k)
      if (own_.owned_outputs[s.id][k]) {
        if (!s.ops[k].escapes) fail("an owned output without a buffer");
        define(s.ops[k].var);
      }
    // The bindings that escape (read after the block, the rule of blocks.h) hand over.
    std::set<int> used;
    ir::vars_read(b, s.end, used);
    for (size_t k = s.end; k-- > s.begin;)
      if (!is_tensor_op(*b.bindings[k].rhs) && used.count(b.bindings[k].var))
        ir::vars_read(*b.bindings[k].rhs, used);
    std::vector<const ir::Atom*> handed;
    for (size_t i = s.begin; i < s.end; ++i) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      if (is_tensor_op(r) || !used.count(b.bindings[i].var)) continue;
      if (hands_over(r))
        for (const auto& a : r.args) handed.push_back(&a);
    }
    const int site = b.bindings[s.begin].rhs->site;
    hand_over(handed, own_.dups[site]);
    for (size_t i = s.begin; i < s.end; ++i)
      if (!is_tensor_op(*b.bindings[i].rhs) && used.count(b.bindings[i].var)) define(b.bindings[i].var);
    drops(own_.drops[site]);
  }

  void group(const ir::Block& b, size_t begin, size_t n) {
    // What each member reads: no other member may give it up.
    std::vector<std::set<int>> reads(n);
    for (size_t k = 0; k < n; ++k) ir::vars_read(*b.bindings[begin + k].rhs, reads[k]);
    const std::set<int> outer = guarded_;  // an enclosing group's
    for (size_t k = 0; k < n; ++k) {
      guarded_ = outer;
      for (size_t j = 0; j < n; ++j)
        if (j != k) guarded_.insert(reads[j].begin(), reads[j].end());
      binding(b.bindings[begin + k], false);
    }
    guarded_ = outer;
    drops(own_.drops[b.bindings[begin].rhs->site]);
  }

  const ir::Module& m_;
  const Plan& plan_;
  const OwnershipPlan& own_;
  int func_;
  std::vector<State> state_;
  std::vector<bool> borrowed_;
  std::set<int> guarded_;
  std::string error_;
};

std::vector<std::string> all_models() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(source("models")))
    if (e.path().extension() == ".acr") out.push_back(e.path().string());
  for (const char* golden : {"tests/golden/ownership/ownership.acr", "tests/golden/generic_pair.acr",
                             "tests/golden/list_fold_closure.acr", "tests/golden/nested_lambdas.acr",
                             "tests/golden/tree_split_concat.acr", "tests/golden/if_and_or.acr",
                             "tests/golden/aot/cell.acr"})
    out.push_back(source(golden));
  return out;
}

TEST(Ownership, EveryReferenceIsGivenUpOnceOnEveryPath) {
  std::vector<std::vector<std::string>> switches = {
      {}, {"specialise"}, {"reuse"}, {"concurrent"}, {"ghosts", "phases"}};
  for (const std::string& model : all_models())
    for (const auto& off : switches) {
      AnalysisOptions a;
      for (const auto& s : off) {
        if (s == "specialise") a.specialise = false;
        if (s == "reuse") a.reuse = false;
        if (s == "concurrent") a.concurrent = false;
        if (s == "ghosts") a.ghosts = false;
        if (s == "phases") a.phases = false;
      }
      auto m = compile_file(model, a);
      for (size_t f = 0; f < m->functions.size(); ++f)
        EXPECT_EQ(Checker(*m, static_cast<int>(f)).run(), "")
            << model << " with " << off.size() << " analyses off";
    }
}

// The checker finds a missing drop and a premature one (it is not vacuous).
TEST(Ownership, TheCheckerCatchesWrongPlans) {
  auto m = compile_file(source("models/berxit_padded.acr"));
  auto broken = std::make_shared<ir::Module>(*m);
  auto plan = std::make_shared<Plan>(*m->plan);
  broken->plan = plan;
  const int heads = m->find_function("head_sum");
  const ir::Rhs* branch = find(*m, heads, [](const ir::Rhs& r) { return r.kind == ir::RhsKind::If; });
  plan->ownership.branches[branch->site][0].drops = VarList{};  // x and mask kept by one branch
  EXPECT_NE(Checker(*broken, heads).run().find("disagree"), std::string::npos);
  *plan = *m->plan;
  const int head = m->find_function("head");
  const ir::Rhs* block = find(*m, head, [&](const ir::Rhs& r) { return m->plan->block_at(r) != nullptr; });
  plan->ownership.drops[block->site] = VarList{};  // x and mask never given up
  EXPECT_NE(Checker(*broken, head).run().find("never given up"), std::string::npos);
  *plan = *m->plan;
  const ir::Rhs* call = find(*m, heads, [](const ir::Rhs& r) { return r.kind == ir::RhsKind::Call; });
  plan->ownership.dups[call->site] = VarList{};  // x and mask moved into head, then read again
  EXPECT_NE(Checker(*broken, heads).run(), "");
}

}  // namespace
}  // namespace acrobat::analysis
