// Argument modes of the batched engines on small programs: a parameter slice chosen by a host int
// groups the batch by slice (one GEMM per slice, on the slice's packed matrix, reading and writing
// the instances' rows in place once the batch is ordered by slice), and every output equals the
// reference engine's. Also the grouped matmul kernel itself against a plain loop.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "acrobat/kernels.h"
#include "compiler/pipeline.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/batched_kernels.h"
#include "engines/inputs.h"
#include "engines/reference_engine.h"

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
  // One batch of 30 nodes: the matmul runs as 3 GEMMs (one per slice), then the tanh loop.
  EXPECT_EQ(actual.stats.nodes, 30);
  EXPECT_EQ(actual.stats.batches, 1);
  EXPECT_EQ(actual.stats.kernel_calls, 3 + 1);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int j = 0; j < 16; ++j)
      EXPECT_NEAR(actual.outputs[i].tensor->data[j], expected.outputs[i].tensor->data[j], 1e-6)
          << "instance " << i;
}

// Each instance a [4, H] matrix and a host int picking one of three weight matrices and biases: the
// 30 instances arrive as slices 0, 1, 2, 0, 1, 2, ... and run as one batch ordered by slice.
TEST(BatchedEngine, ABatchIsOrderedByIndexedWeights) {
  auto module = compile_text("acrobat_grouping_rows.acr", R"(
dim H = 16
param Ws[3]: f32[H, H]
param bs[3]: f32[1, H]
def main(x: (int, f32[4, H])) -> f32[4, H] {
  let (i, v) = x;
  tanh(v @ Ws[i] + bs[i]) * 2.0
}
)");
  auto params = std::make_shared<ParamStore>(init_params(*module, 4));
  const ir::Function& f = module->functions[entry_function(*module, "main")];
  std::vector<Value> inputs;
  for (int n = 0; n < 30; ++n) {
    nlohmann::json rows = nlohmann::json::array();
    for (int r = 0; r < 4; ++r) {
      nlohmann::json row = nlohmann::json::array();
      for (int j = 0; j < 16; ++j) row.push_back(std::sin(n * 64 + r * 16 + j));
      rows.push_back(row);
    }
    inputs.push_back(value_from_json(nlohmann::json::array({n % 3, rows}), f.vars[f.params[0]].type,
                                     SourceLoc{"test"}));
  }
  RunResult expected = ReferenceEngine(module, params).run(inputs);
  RunResult batched = BatchedEngine(module, params).run(inputs);
  AotOptions ao;
  ao.cache_dir = ACROBAT_TEST_CACHE_DIR;
  RunResult aot = AotEngine(module, params, ao).run(inputs);
  for (const RunResult* r : {&batched, &aot}) {
    EXPECT_EQ(r->stats.nodes, 30);
    EXPECT_EQ(r->stats.batches, 1);
    for (size_t i = 0; i < inputs.size(); ++i)
      for (int j = 0; j < 64; ++j)
        ASSERT_NEAR(r->outputs[i].tensor->data[j], expected.outputs[i].tensor->data[j], 1e-5)
            << (r == &aot ? "aot" : "batched") << ", instance " << i << ", element " << j;
  }
  // Both engines: three GEMMs (one per slice), then one fused loop for the bias add, tanh and mul.
  EXPECT_EQ(batched.stats.kernel_calls, 3 + 1);
  EXPECT_EQ(aot.stats.kernel_calls, 3 + 1);
}

TEST(BatchedKernels, OrderByWeightsGroupsByFirstAppearance) {
  float m[3];
  const float *a = &m[0], *b = &m[1], *c = &m[2];
  EXPECT_EQ(order_by_weights({c, a, c, b, a}), (std::vector<int>{0, 2, 1, 4, 3}));
  EXPECT_TRUE(order_by_weights({c, c, a, b, b}).empty()) << "already grouped: kept as it is";
  EXPECT_TRUE(order_by_weights({a}).empty());
}

// batched_matmul_grouped against a plain loop: adjacent runs (read and written in place) and
// scattered groups (gathered), one-row and several-row instances, packed and plain weights.
TEST(BatchedKernels, GroupedMatmulEqualsALoop) {
  const int64_t K = 8, N = 24, B = 7;
  std::vector<std::vector<float>> W(3, std::vector<float>(K * N));
  std::vector<std::shared_ptr<const kernels::PackedWeights>> P;
  for (int w = 0; w < 3; ++w) {
    for (int64_t i = 0; i < K * N; ++i) W[w][i] = std::cos(float(w * 100 + i));
    P.push_back(kernels::pack_weights(int(K), int(N), W[w].data(), int(N)));
  }
  for (int64_t M : {1, 3}) {
    for (bool adjacent : {true, false}) {
      for (bool packed : {true, false}) {
        // One-row instances lie 2K apart (a strided panel); several-row ones back to back.
        const int64_t stride = M == 1 ? 2 * K : M * K;
        std::vector<float> a(B * stride);
        for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i));
        std::vector<int> pick = adjacent ? std::vector<int>{0, 0, 1, 1, 1, 2, 2}
                                         : std::vector<int>{0, 1, 0, 2, 1, 2, 0};
        std::vector<const float*> weights;
        std::vector<const kernels::PackedWeights*> packs;
        for (int p : pick) {
          weights.push_back(W[p].data());
          packs.push_back(packed ? P[p].get() : nullptr);
        }
        std::vector<int64_t> a_shape{M, K}, out_shape{M, N};
        BatchOperand op{a.data(), stride, &a_shape, nullptr, nullptr};
        std::vector<float> out(B * M * N, -1.0f);
        Arena scratch;
        int64_t calls = batched_matmul_grouped(B, op, weights.data(), packs.data(), out_shape,
                                               out.data(), scratch);
        EXPECT_EQ(calls, 3);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t r = 0; r < M; ++r)
            for (int64_t n = 0; n < N; ++n) {
              float want = 0;
              for (int64_t k = 0; k < K; ++k) want += a[b * stride + r * K + k] * W[pick[b]][k * N + n];
              ASSERT_NEAR(out[(b * M + r) * N + n], want, 1e-4)
                  << "M " << M << (adjacent ? ", adjacent" : ", scattered")
                  << (packed ? ", packed" : ", plain") << ", instance " << b;
            }
      }
    }
  }
}

}  // namespace
}  // namespace acrobat
