#include "analysis/explain.h"

#include <fmt/format.h>

#include <map>

#include "analysis/plan.h"

namespace acrobat::analysis {

namespace {


std::string flops_text(int64_t flops) {
  if (flops >= 1000000) return fmt::format("{:.2f} MFLOP", flops * 1e-6);
  if (flops >= 1000) return fmt::format("{:.1f} kFLOP", flops * 1e-3);
  return fmt::format("{} FLOP", flops);
}

class Explainer {
 public:
  explicit Explainer(const ir::Module& m) : m_(m), plan_(*m.plan) {
    for (const auto& c : plan_.reuse.clones) clone_of_[c.clone] = &c;
    for (const auto& s : plan_.specialisations) special_of_[s.specialised] = &s;
  }

  std::string run() {
    SizeNamesScope names(plan_.size_names);
    const AnalysisOptions& o = plan_.options;
    out_ += fmt::format(
        "analyses: specialise {}, reuse {}, clone {}, ghosts {}, phases {}, concurrent {}\n",
        on(o.specialise), on(o.reuse), on(o.reuse && o.clone), on(o.ghosts), on(o.phases),
        on(o.concurrent));
    out_ += fmt::format("{} static blocks, {} clones, {} specialisations\n", count_blocks(),
                        plan_.reuse.clones.size(), plan_.specialisations.size());
    for (size_t f = 0; f < m_.functions.size(); ++f) function(static_cast<int>(f));
    return out_;
  }

 private:
  static const char* on(bool b) { return b ? "on" : "off"; }

  size_t count_blocks() const {
    size_t n = 0;
    for (const auto& s : plan_.blocks) n += s.ops.empty() ? 0 : 1;
    return n;
  }

  // Functions that hold no tensor work, no clone and no phase end are listed in one line.
  void function(int f) {
    const ir::Function& fn = m_.functions[f];
    out_ += fmt::format("\nfunction @{}{}\n", fn.name, depth_summary(plan_.depth, f));
    if (auto it = special_of_.find(fn.name); it != special_of_.end())
      out_ += fmt::format("  specialisation of @{} for the function argument @{}\n",
                          it->second->callee, it->second->argument);
    if (auto it = clone_of_.find(fn.name); it != clone_of_.end()) {
      const CloneRecord& c = *it->second;
      out_ += fmt::format("  clone of @{}: its callers pass {}\n", c.original, c.reason);
      if (!c.call_sites.empty())
        out_ += fmt::format("    called from {}\n", fmt::join(c.call_sites, ", "));
    }
    phase_ = 0;
    walk(fn.body, f);
  }

  void walk(const ir::Block& b, int f) {
    bool top = !plan_.depth.in_recursion[f];
    for (size_t i = 0; i < b.bindings.size();) {
      const ir::Rhs& r = *b.bindings[i].rhs;
      if (const StaticBlock* found = plan_.block_at(r)) {
        const StaticBlock& s = *found;
        if (!s.ops.empty()) block(s, top);
        i = std::max(s.end, i + 1);
        continue;
      }
      if (int n = plan_.concurrency.group_at(r)) {
        std::vector<std::string> members;
        for (int k = 0; k < n; ++k) members.push_back(b.bindings[i + k].rhs->span.begin.str());
        out_ += fmt::format("  concurrent: {}\n", fmt::join(members, ", "));
      }
      out_ += ghost_line(plan_.depth, r);
      for (const ir::Block* nested : {&r.then_block, &r.else_block}) walk(*nested, f);
      for (const auto& c : r.clauses) walk(c.body, f);
      out_ += phase_end_line(m_, plan_.depth, r, phase_);
      ++i;
    }
  }

  void block(const StaticBlock& s, bool top) {
    std::string depth = s.static_depth > 0 ? fmt::format("depth {} (static)", s.static_depth)
                                           : std::string("depth 1 + deepest input");
    std::string phase = top ? fmt::format("phase {}", phase_) : std::string("caller's phase");
    out_ += fmt::format("  block #{} at {}: {} ops, {}, {}, {}\n", s.id, s.name, s.ops.size(),
                        depth, phase, s.ragged() ? "FLOPs per instance" : flops_text(s.flops));
    std::vector<std::string> ops;
    for (const auto& op : s.ops) {
      std::string name = op_info(op.rhs->op).name;
      if (op.bias_arg >= 0) name += "+bias";
      if (op.fused) continue;
      if (op.view) name += "(view)";
      ops.push_back(name);
    }
    out_ += fmt::format("    ops: {}\n", fmt::join(ops, " "));
    const ir::Function& fn = m_.functions[s.function];
    for (const auto& a : s.args) {
      std::string var = ir::var_str(fn, a.var);
      std::string mode = a.known ? arg_mode_name(a.mode) : "checked per batch";
      if (a.param >= 0) mode += " @" + m_.params[a.param].name;
      else if (a.known && a.mode == ArgMode::Reuse) mode += " (constant)";
      out_ += fmt::format("    arg {} {}: {}\n", var, shape_str(a.shape), mode);
    }
    if (s.ragged()) {
      std::vector<std::string> sizes;
      for (size_t z = 0; z < s.sizes.size(); ++z)
        sizes.push_back(dim_str(s.sizes[z]) + " = " + ir::var_str(fn, s.size_vars[z]));
      out_ += fmt::format("    sizes per instance: {}\n", fmt::join(sizes, ", "));
    }
    out_ += s.ragged() ? "    ragged plan (packed rows, no padding):\n" : "    kernel plan:\n";
    std::string listing = s.ragged() ? ragged_plan_str(s, plan_.ragged[s.id]) : kernel_plan_str(s, plan_.kernels[s.id]);
    for (size_t at = 0; at < listing.size();) {
      size_t end = listing.find('\n', at);
      out_ += "    " + listing.substr(at, end - at + 1);
      at = end + 1;
    }
  }

  const ir::Module& m_;
  const Plan& plan_;
  std::map<std::string, const CloneRecord*> clone_of_;
  std::map<std::string, const SpecialisationRecord*> special_of_;
  int phase_ = 0;
  std::string out_;
};

}  // namespace

std::string explain(const ir::Module& module) { return Explainer(module).run(); }

}  // namespace acrobat::analysis
