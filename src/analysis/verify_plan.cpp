#include "analysis/verify_plan.h"

#include "analysis/plan.h"
#include "ir/verify.h"
#include "support/diagnostics.h"

namespace acrobat::analysis {

namespace {

// The first problem found; caught by find_plan_problem, which adds the stage.
struct Problem {
  std::string what;
};

class PlanVerifier {
 public:
  PlanVerifier(const ir::Module& m, ir::NodeIndex index) : m_(m), index_(std::move(index)) {}

  void run(const Plan& p) const {
    size_t n = m_.functions.size();
    auto per_function = [&](size_t size, const std::string& what) {
      if (size != n)
        fail("the plan's " + what + " has " + std::to_string(size) + " entries for " +
             std::to_string(n) + " functions");
    };
    per_function(p.depth.chain_length.size(), "chain lengths");
    per_function(p.depth.in_recursion.size(), "recursion marks");
    if (p.options.reuse) {
      per_function(p.reuse.origins.size(), "reuse origins");
      for (size_t f = 0; f < n; ++f)
        if (p.reuse.origins[f].size() != m_.functions[f].vars.size())
          fail("the reuse origins of @" + m_.functions[f].name + " do not cover its variables");
    }
    if (p.kernels.size() != p.blocks.size())
      fail("the plan has " + std::to_string(p.kernels.size()) + " kernel plans for " +
           std::to_string(p.blocks.size()) + " static blocks");
    for (size_t i = 0; i < p.blocks.size(); ++i) static_block(p.blocks[i], i);
    sites(p.block_at_site.size(), "block starts");
    for (size_t site = 0; site < p.block_at_site.size(); ++site) {
      int id = p.block_at_site[site];
      if (id < 0) continue;
      const ir::NodePlace& at = node(static_cast<int>(site), "a block start");
      if (id < 0 || static_cast<size_t>(id) >= p.blocks.size() || p.blocks[id].block != at.block ||
          p.blocks[id].begin != at.index)
        fail("block start " + std::to_string(id) + " is not where its static block begins");
    }
    for (const auto& [site, pads] : p.depth.ghosts) {
      const ir::Rhs* r = &rhs_at(site, "ghost padding");
      size_t branches = r->kind == ir::RhsKind::If      ? 2
                        : r->kind == ir::RhsKind::Match ? r->clauses.size()
                                                    : 0;
      if (pads.size() != branches || branches == 0)
        fail("ghost padding for " + std::to_string(pads.size()) + " branches on " + ir::rhs_kind_name(*r) +
             " with " + std::to_string(branches));
    }
    for (int site : p.depth.phase_ends) {
      const ir::Rhs* r = &rhs_at(site, "a phase end");
      if (r->kind != ir::RhsKind::Call) fail("a phase ends at " + ir::rhs_kind_name(*r) + ", not at a call");
    }
    sites(p.tail_call.size(), "tail calls");
    for (size_t site = 0; site < p.tail_call.size(); ++site) {
      if (!p.tail_call[site]) continue;
      const ir::NodePlace& at = node(static_cast<int>(site), "a tail call");
      const ir::Rhs& r = *at.block->bindings[at.index].rhs;
      if (r.kind != ir::RhsKind::Call || at.index + 1 != at.block->bindings.size())
        fail("a tail call at " + ir::rhs_kind_name(r) + " that is not its block's last binding");
    }
    if (p.ownership.enabled) {
      sites(p.ownership.dups.size(), "dups");
      sites(p.ownership.drops.size(), "drops");
      per_function(p.ownership.bodies.size(), "ownership actions");
      per_function(p.ownership.tracked.size(), "tracked variables");
      if (p.ownership.owned_outputs.size() != p.blocks.size())
        fail("the plan has owned outputs for " + std::to_string(p.ownership.owned_outputs.size()) +
             " of " + std::to_string(p.blocks.size()) + " static blocks");
      for (const auto& [site, branches] : p.ownership.branches) {
        const ir::Rhs* r = &rhs_at(site, "branch ownership");
        size_t n = r->kind == ir::RhsKind::If ? 2 : r->kind == ir::RhsKind::Match ? r->clauses.size() : 0;
        if (branches.size() != n || n == 0)
          fail("ownership actions for " + std::to_string(branches.size()) + " branches on " +
               ir::rhs_kind_name(*r) + " with " + std::to_string(n));
      }
    }
    if (p.options.concurrent) sites(p.concurrency.group_at_site.size(), "concurrent groups");
    for (size_t site = 0; site < p.concurrency.group_at_site.size(); ++site) {
      int count = p.concurrency.group_at_site[site];
      if (count == 0) continue;
      const ir::NodePlace& at = node(static_cast<int>(site), "a concurrent group");
      if (count < 2 || at.index + count > at.block->bindings.size())
        fail("a concurrent group of " + std::to_string(count) + " bindings from binding " +
             std::to_string(at.index) + " of a block of " +
             std::to_string(at.block->bindings.size()));
    }
  }

  // The node at `site`, which the plan keys `what` by.
  const ir::Rhs& rhs_at(int site, const std::string& what) const {
    auto it = index_.sites.find(site);
    if (it == index_.sites.end())
      fail("the plan keys " + what + " by site " + std::to_string(site) +
           ", which no node of the module has");
    return *it->second;
  }
  const ir::NodePlace& node(int site, const std::string& what) const {
    return index_.nodes.at(&rhs_at(site, what));
  }
  // A table by site covers every site.
  void sites(size_t size, const std::string& what) const {
    if (size != static_cast<size_t>(m_.num_sites))
      fail("the plan's table of " + what + " has " + std::to_string(size) + " entries for " +
           std::to_string(m_.num_sites) + " sites");
  }

  void static_block(const StaticBlock& s, size_t i) const {
    auto it = index_.blocks.find(s.block);
    if (s.id != static_cast<int>(i) || it == index_.blocks.end() || it->second != s.function ||
        s.begin >= s.end || s.end > s.block->bindings.size())
      fail("static block " + std::to_string(i) + " is not a range of bindings of a block of " +
           func(s.function));
  }

  [[noreturn]] void fail(const std::string& what) const { throw Problem{what}; }

  std::string func(int f) const {
    return f >= 0 && static_cast<size_t>(f) < m_.functions.size() ? "@" + m_.functions[f].name
                                                                  : "function " + std::to_string(f);
  }

  const ir::Module& m_;
  const ir::NodeIndex index_;
};

}  // namespace

std::string find_plan_problem(const ir::Module& module, const std::string& stage) {
  ir::NodeIndex index;
  std::string problem = ir::find_ir_problem(module, stage, &index);
  if (!problem.empty() || !module.plan) return problem;
  try {
    PlanVerifier(module, std::move(index)).run(*module.plan);
  } catch (const Problem& p) {
    return "IR verifier: after stage '" + stage + "', " + p.what;
  }
  return "";
}

void verify_plan(const ir::Module& module, const std::string& stage) {
  const std::string problem = find_plan_problem(module, stage);
  if (!problem.empty()) internal_error(__FILE__, __LINE__, problem);
}

}  // namespace acrobat::analysis
