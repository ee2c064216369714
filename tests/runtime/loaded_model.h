// A model as the engine tests use it: compiled with some dims, parameters from a seed, its inputs,
// and the reference engine's outputs on them (what every other engine must reproduce).
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/pipeline.h"
#include "engines/engine.h"
#include "engines/reference_engine.h"

namespace acrobat {

// How many SST test trees the model tests over the whole test set run (0: all 2210). Under the
// sanitizers the first 512: every batch size, thread count and schedule as in the normal build, at
// a quarter of the cost (the whole set took 100-154 s per model under ThreadSanitizer, and 15-32 s
// per model and schedule under ASan and UBSan, half of it the reference engine's run).
#ifdef ACROBAT_TEST_SANITIZED
constexpr size_t kSstTrees = 512;
#else
constexpr size_t kSstTrees = 0;
#endif

struct LoadedModel {
  std::shared_ptr<const ir::Module> module;
  std::shared_ptr<const ParamStore> params;
  std::vector<Value> inputs;
  std::vector<Value> expected;  // reference engine outputs
};

// `make_inputs` gets the type of `main`'s parameter.
inline LoadedModel load_model(const std::string& path, const DimOverrides& dims, uint64_t seed,
                              const std::function<std::vector<Value>(const Type&)>& make_inputs) {
  LoadedModel l;
  CompileOptions options;
  options.dims = dims;
  l.module = compile_model(path, options);
  l.params = std::make_shared<ParamStore>(init_params(*l.module, seed));
  const auto& f = l.module->functions[entry_function(*l.module, "main")];
  l.inputs = make_inputs(f.vars[f.params[0]].type);
  l.expected = ReferenceEngine(l.module, l.params).run(l.inputs).outputs;
  return l;
}

// `n` inputs for a `main` that takes one tensor, normally distributed from `seed`.
inline std::vector<Value> random_tensor_inputs(const ir::Module& m, size_t n, uint32_t seed) {
  const auto& f = m.functions[entry_function(m, "main")];
  const Type& type = f.vars[f.params[0]].type;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i) {
    Tensor t = Tensor::allocate(type->shape);
    for (int64_t j = 0; j < t.size(); ++j) t.data[j] = normal(rng);
    out.push_back(Value::of_tensor(std::move(t)));
  }
  return out;
}

}  // namespace acrobat
