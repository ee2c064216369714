// Argument modes of the batched engine on a small program: a parameter slice chosen by a host int
// groups the batch by slice (one GEMM per slice), and every output equals the reference engine's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "ir/pipeline.h"
#include "runtime/batched_engine.h"
#include "runtime/inputs.h"
#include "runtime/reference_engine.h"

namespace acrobat {
namespace {

std::shared_ptr<const ir::Module> compile_text(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return compile_model(path.string(), CompileOptions{});
}

TEST(BatchedEngine, IndexedParamsAreGroupedBySlice) {
  auto module = compile_text("acrobat_grouping.acr", R"(
dim H = 16
param Ws[3]: f32[H, H]
def main(x: (int, f32[1, H])) -> f32[1, H] {
  let (i, v) = x;
  tanh(v @ Ws[i])
}
)");
  auto params = std::make_shared<ParamStore>(init_params(*module, 3));
  const ir::Function& f = module->functions[entry_function(*module, "main")];
  std::vector<Value> inputs;
  for (int n = 0; n < 30; ++n) {
    nlohmann::json row = nlohmann::json::array();
    for (int j = 0; j < 16; ++j) row.push_back(std::sin(n * 16 + j));
    inputs.push_back(value_from_json(nlohmann::json::array({n % 3, {row}}), f.vars[f.params[0]].type,
                                     SourceLoc{"test"}));
  }
  RunResult expected = ReferenceEngine(module, params).run(inputs);
  RunResult actual = BatchedEngine(module, params).run(inputs);
  // One batch of 30 nodes: the matmul runs as 3 GEMMs (one per slice), then one tanh.
  EXPECT_EQ(actual.stats.nodes, 30);
  EXPECT_EQ(actual.stats.batches, 1);
  EXPECT_EQ(actual.stats.kernel_calls, 4);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int j = 0; j < 16; ++j)
      EXPECT_NEAR(actual.outputs[i].tensor->data[j], expected.outputs[i].tensor->data[j], 1e-6)
          << "instance " << i;
}

}  // namespace
}  // namespace acrobat
