// Bounded memory: batch outputs that no host value and no pending node can reach any more are
// released during the run (analysis/ownership.h, runtime/graph.h). A loop whose live tensors stay
// bounded while its total allocation grows with the iteration count peaks at about the same memory
// at N and 2N iterations on both batched engines (every scheduler for the interpreted one), with
// and without tensor reads in the loop, and gives the reference engine's outputs; with the release
// switched off (--disable release) the peak grows with the count, so the measurement can tell.
// Every case of the ownership analysis gives the reference engine's outputs with released buffers
// poisoned, with each other analysis off in turn. The buffer pool reuses what is released (for a
// request of up to half its size too) and holds no more than twice the most it ever had in use.
#include <gtest/gtest.h>

#include <cstdlib>

#include "compiler/pipeline.h"
#include "lang/frontend.h"
#include "engines/aot_engine.h"
#include "engines/batched_engine.h"
#include "runtime/arena.h"
#include "runtime/buffer_pool.h"
#include "engines/reference_engine.h"
#include "expect_values.h"

namespace acrobat {
namespace {

const std::string kSource = ACROBAT_SOURCE_DIR;
const std::string kCache = ACROBAT_TEST_CACHE_DIR;

// `iterate` runs n iterations, each one static block making a new [1, H] accumulator (16 instances
// x 4 KiB: 64 KiB per batch output); only x and the accumulator are live.
const char* kLoop = R"(
dim H = 1024
param W: f32[H, H]
param x0: f32[1, H]
def iterate(x: f32[1, H], acc: f32[1, H], n: int) -> f32[1, H] {
  if n == 0 { acc } else { iterate(x, tanh(acc @ W + x), n - 1) }
}
def main(n: int) -> f32[1, H] {
  let x = tanh(x0 * 2.0);
  iterate(x, x * 0.5, n)
}
)";

// The same with a tensor read deciding every iteration (never true: tanh stays below 2): each
// instance runs on a fiber and every iteration is a flush.
const char* kReadingLoop = R"(
dim H = 1024
param W: f32[H, H]
param x0: f32[1, H]
def iterate(x: f32[1, H], acc: f32[1, H], n: int) -> f32[1, H] {
  if n == 0 { acc } else if item(max(acc)) > 2.0 { acc } else { iterate(x, tanh(acc @ W + x), n - 1) }
}
def main(n: int) -> f32[1, H] {
  let x = tanh(x0 * 2.0);
  iterate(x, x * 0.5, n)
}
)";

constexpr int kInstances = 16;
constexpr int64_t kOutputBytes = kInstances * 1024 * 4;  // one batch of accumulators

std::shared_ptr<const ir::Module> compile(const char* text, bool release) {
  CompileOptions o;
  o.analysis.release = release;
  // Every instance's iteration k is the same computation (same x, same accumulator): shared nodes
  // would run it once for all 16 and leave one row per batch to measure.
  o.analysis.share = false;
  return compile_checked(parse_model_text("loop.acr", text, {}), o);
}

// Instances run n to n + 3 iterations: the last batches are smaller. (Each instance's output is a
// row of its last batch, whose buffer the runtime keeps until the run ends.)
std::vector<Value> counts(int64_t n) {
  std::vector<Value> out;
  for (int i = 0; i < kInstances; ++i) out.push_back(Value::of_int(n + i % 4));
  return out;
}

enum class Kind { Interpreted, Aot };

struct Case {
  const char* name;
  const char* text;
  Kind kind;
  Scheduler scheduler;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class BoundedMemory : public ::testing::TestWithParam<Case> {
 protected:
  // A NaN-filled buffer held back would count as in use: this test measures the real release.
  void SetUp() override { unsetenv("ACROBAT_POISON_RELEASED"); }

  // Peak bytes of one run of `n` iterations per instance, outputs checked against the reference.
  int64_t peak(bool release, int64_t n) {
    const Case& c = GetParam();
    auto module = compile(c.text, release);
    auto params = std::make_shared<ParamStore>(init_params(*module, 3));
    std::unique_ptr<Engine> engine;
    if (c.kind == Kind::Aot) {
      AotOptions o;
      o.cache_dir = kCache;
      o.threads = 1;
      engine = std::make_unique<AotEngine>(module, params, o);
    } else {
      engine = std::make_unique<BatchedEngine>(module, params, c.scheduler);
    }
    const std::vector<Value> inputs = counts(n);
    RunResult got = engine->run(inputs);
    RunResult want = ReferenceEngine(module, params).run(inputs);
    EXPECT_EQ(got.outputs.size(), want.outputs.size());
    // Values in (-1, 1) after up to 135 products of 1024 terms summed in another order than the
    // reference engine's: 1e-5 absolute (a released buffer read by mistake is far off, or NaN).
    for (size_t i = 0; i < got.outputs.size(); ++i)
      expect_values_close(got.outputs[i], want.outputs[i], "instance " + std::to_string(i), 1e-4f,
                          1e-5f);
    EXPECT_GE(got.stats.nodes, kInstances * n);
    return got.stats.peak_bytes;
  }
};

TEST_P(BoundedMemory, PeakDoesNotGrowWithTheIterations) {
  const int64_t n = 60;
  const int64_t at_n = peak(true, n), at_2n = peak(true, 2 * n);
  // Bounded: a few batch outputs (x, two accumulators, the last batches holding the outputs) and
  // the scratch of a batch, not the n outputs every iteration allocates.
  EXPECT_LE(at_2n, at_n + at_n / 8) << "peak at " << n << ": " << at_n << " bytes";
  EXPECT_LT(at_n, 12 * kOutputBytes);
}

TEST_P(BoundedMemory, WithoutReleasePeakGrowsWithTheIterations) {
  const int64_t n = 60;
  const int64_t at_n = peak(false, n), at_2n = peak(false, 2 * n);
  EXPECT_GT(at_n, n * kOutputBytes / 2);
  EXPECT_GT(at_2n, at_n + at_n / 2);
}

INSTANTIATE_TEST_SUITE_P(
    Loops, BoundedMemory,
    ::testing::Values(Case{"interpreted_inline_depth", kLoop, Kind::Interpreted, Scheduler::InlineDepth},
                      Case{"interpreted_depth", kLoop, Kind::Interpreted, Scheduler::Depth},
                      Case{"interpreted_agenda", kLoop, Kind::Interpreted, Scheduler::Agenda},
                      Case{"aot", kLoop, Kind::Aot, Scheduler::InlineDepth},
                      Case{"interpreted_reads", kReadingLoop, Kind::Interpreted, Scheduler::InlineDepth},
                      Case{"aot_reads", kReadingLoop, Kind::Aot, Scheduler::InlineDepth}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Classes: 64-byte multiples up to 4 KiB, then at most 12.5% above the request.
TEST(BufferPool, SizeClasses) {
  EXPECT_EQ(BufferPool::size_class(1), 16u);
  EXPECT_EQ(BufferPool::size_class(1000), 1008u);
  EXPECT_EQ(BufferPool::size_class(1024), 1024u);
  size_t last = 0;
  for (size_t n = 1; n < 3'000'000; n += n / 7 + 1) {
    const size_t c = BufferPool::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % 16, 0u) << n;
    EXPECT_GE(c, last) << n;
    if (n > 1024) {
      EXPECT_LE(c, n + n / 8) << n;
    }
    last = c;
  }
}

TEST(BufferPool, ReusesReleasedBuffersAndHoldsNoMoreThanTwiceItsMostInUse) {
  BufferPool pool;
  float* a = pool.alloc(1000);
  pool.release(a, 1000);
  EXPECT_EQ(pool.alloc(995), a);  // the same class
  pool.release(a, 995);
  EXPECT_EQ(pool.alloc(600), a);  // a smaller class, at least half the buffer's
  EXPECT_EQ(pool.bytes_in_use(), 1008 * sizeof(float));  // counted at the buffer's size
  pool.release(a, 600);
  float* b = pool.alloc(400);  // less than half: a buffer of its own
  EXPECT_NE(b, a);
  pool.release(b, 400);
  // Requests whose sizes drift: the memory held stays under twice the most ever in use.
  size_t most = 0;
  std::vector<std::pair<float*, size_t>> live;
  for (int round = 0; round < 40; ++round) {
    const size_t n = 5000 + 3000 * static_cast<size_t>(round % 7) + 100 * static_cast<size_t>(round);
    for (int k = 0; k < 6; ++k) {
      live.emplace_back(pool.alloc(n), n);
      live.back().first[n - 1] = 1.0f;  // writable to the end
      most = std::max(most, pool.bytes_in_use());
      EXPECT_LE(pool.bytes_held(), 2 * most) << "round " << round;
    }
    // Release all but the newest two.
    while (live.size() > 2) {
      pool.release(live.front().first, live.front().second);
      live.erase(live.begin());
    }
  }
  for (auto [p, n] : live) pool.release(p, n);
  EXPECT_EQ(pool.bytes_in_use(), 0u);
  EXPECT_LE(pool.bytes_held(), 2 * most);
}

TEST(Arena, RunsOfChangingSizesSettleInOneChunkOfTheLargestRun) {
  // Runs alternating between two sizes of large allocations (a training step's adjoints at each
  // batch's lengths), each allocation larger than a default chunk: after the first runs the arena
  // holds one chunk, as large as the most a run used, and makes no more.
  Arena arena;
  const size_t sizes[] = {size_t{50} << 20, size_t{51} << 20};
  size_t most = 0;
  for (int run = 0; run < 6; ++run) {
    const size_t n = sizes[run % 2] / 4;  // floats: 50 and 51 MiB
    float* a = arena.alloc(n / 2);
    float* b = arena.alloc(n / 2);
    a[n / 2 - 1] = b[n / 2 - 1] = 1.0f;  // writable to the end
    EXPECT_NE(a, b);
    most = std::max(most, arena.bytes_in_use());
    arena.reset();
    if (run >= 2) {
      EXPECT_EQ(arena.chunks(), 1u) << "run " << run;
      EXPECT_EQ(arena.held_bytes(), most) << "run " << run;
    }
  }
  EXPECT_EQ(arena.bytes_in_use(), 0u);
}

// tests/golden/ownership/ownership.acr holds a function for each case of the analysis (dups, moves,
// drops on branch entry, dead results, borrowed values, a closure, a tail loop, a tensor read).
// With NaN in every released buffer, a premature release would show in the outputs.
TEST(Release, EveryCaseOfTheAnalysisGivesTheReferenceOutputs) {
  setenv("ACROBAT_POISON_RELEASED", "1", 1);
  const std::vector<std::pair<std::string, analysis::AnalysisOptions>> configs = [] {
    std::vector<std::pair<std::string, analysis::AnalysisOptions>> out{{"all analyses", {}}};
    analysis::AnalysisOptions a;
    a.specialise = false;  // foldl calls its lambda through a closure
    out.push_back({"no specialisation", a});
    a = {};
    a.reuse = false;
    out.push_back({"no reuse analysis", a});
    a = {};
    a.ghosts = a.phases = false;
    out.push_back({"no ghosts or phases", a});
    return out;
  }();
  for (const auto& [name, analyses] : configs) {
    SCOPED_TRACE(name);
    CompileOptions o;
    o.analysis = analyses;
    auto module = compile_model(kSource + "/tests/golden/ownership/ownership.acr", o);
    auto params = std::make_shared<ParamStore>(init_params(*module, 5));
    std::vector<Value> inputs;
    for (int i = 0; i < 9; ++i) {
      Tensor t = Tensor::allocate({1, 4});
      for (int j = 0; j < 4; ++j) t.data[j] = 0.1f * static_cast<float>(i - 4) + 0.05f * static_cast<float>(j);
      inputs.push_back(Value::of_tensor(std::move(t)));
    }
    RunResult want = ReferenceEngine(module, params).run(inputs);
    AotOptions ao;
    ao.cache_dir = kCache;
    ao.threads = 1;
    std::vector<std::unique_ptr<Engine>> engines;
    engines.push_back(std::make_unique<BatchedEngine>(module, params));
    engines.push_back(std::make_unique<AotEngine>(module, params, ao));
    for (auto& engine : engines) {
      SCOPED_TRACE(engine->name());
      RunResult got = engine->run(inputs);
      ASSERT_EQ(got.outputs.size(), want.outputs.size());
      for (size_t i = 0; i < got.outputs.size(); ++i)
        expect_values_close(got.outputs[i], want.outputs[i], "instance " + std::to_string(i), 1e-5f,
                            1e-6f);
    }
  }
}

}  // namespace
}  // namespace acrobat
