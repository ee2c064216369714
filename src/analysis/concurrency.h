// Concurrent independent calls inside one instance (ACRoBat's concurrent execution of independent
// calls, here inferred from the IR's data dependences, with no annotation).
//
// A binding may suspend when it reads a tensor (item, argmax) or may reach such a read through a
// call, an if or a match. Two bindings of one IR block that both may suspend, and where the later
// does not read what the earlier defines, may run concurrently: while one waits for its tensor, the
// other records its own tensor work, which then joins the same batch. The pass makes such bindings
// adjacent: host bindings between them that cannot fail and hold no tensor work (copies, host
// arithmetic other than division, tuples, constructors, projections, parameter loads, closures)
// move before the group when they read nothing it defines, and after it otherwise. Every group of
// adjacent independent suspending bindings is recorded; the engines fork one fiber per member
// (runtime/fibers.h) and join before the binding after the group. The result equals sequential
// execution: members write distinct variables, recording order does not change any value, and the
// error of the earliest member wins. Programs without tensor reads get no groups.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace acrobat::analysis {

struct ConcurrencyPlan {
  // By IR site: how many consecutive bindings the group starting there holds (>= 2), 0 for none.
  std::vector<int> group_at_site;
  int num_groups = 0;
  std::vector<bool> may_suspend;  // per function
  int group_at(const ir::Rhs& r) const {
    return static_cast<size_t>(r.site) < group_at_site.size() ? group_at_site[r.site] : 0;
  }
};

struct Grouped {
  ir::Module module;  // with the bindings of every block reordered as described above
  ConcurrencyPlan plan;
};
// The if and match nodes whose blocks are reordered are rebuilt with their sites.
Grouped group_concurrent_calls(ir::Module module);

}  // namespace acrobat::analysis
