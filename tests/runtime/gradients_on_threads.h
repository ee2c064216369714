// The same bits with 1 and 2 threads on each batched engine, where the forward of a gradient and
// its backward share their work among the threads, always cut the same way (graph_engine.cpp).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engines/aot_engine.h"
#include "engines/batched_engine.h"

namespace acrobat {

// The gradients of `inputs` (entry `loss`) on the interpreter and the AOT engine, each with 1 and 2
// threads.
struct OnThreads {
  std::vector<GradResult> batched, aot;
};
inline OnThreads gradients_on_threads(const std::shared_ptr<const ir::Module>& module,
                                      const std::shared_ptr<ParamStore>& params, const std::vector<Value>& inputs) {
  OnThreads r;
  for (int threads : {1, 2}) {
    r.batched.push_back(BatchedEngine(module, params, Scheduler::InlineDepth, threads).gradients(inputs));
    AotOptions o;
    o.cache_dir = ACROBAT_TEST_CACHE_DIR;
    o.threads = threads;
    r.aot.push_back(AotEngine(module, params, o).gradients(inputs));
  }
  return r;
}

// Each engine's gradients the same bits with 1 thread and 2.
inline void expect_same_bits(const OnThreads& r) {
  for (const auto* got : {&r.batched, &r.aot}) {
    ASSERT_EQ((*got)[1].grads.size(), (*got)[0].grads.size());
    for (size_t k = 0; k < (*got)[0].grads.size(); ++k)
      for (int64_t j = 0; j < (*got)[0].grads[k].size(); ++j)
        ASSERT_EQ((*got)[1].grads[k].data[j], (*got)[0].grads[k].data[j])
            << (got == &r.aot ? "aot" : "batched") << ", param " << k << ", entry " << j;
  }
}

}  // namespace acrobat
