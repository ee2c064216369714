// Golden IR: every tests/golden/NAME.acr must print (`acrobat emit ir`) exactly as NAME.ir.
//
// To regenerate after an intended change of the IR or its printer, run
//   ACROBAT_UPDATE_GOLDEN=1 build/tests/lang/lang_test --gtest_filter='Golden*'
// which rewrites every NAME.ir (and passes), then read the diff of tests/golden/*.ir before keeping
// it: the files are the reference for what lowering produces.
#include <cstdlib>

#include "compiler/pipeline.h"
#include "lang_test_util.h"

namespace acrobat::test {
namespace {

bool updating() {
  const char* v = std::getenv("ACROBAT_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

class GoldenFile : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenFile, PrintsTheExpectedIr) {
  const std::string model = GetParam();
  const std::string golden = model.substr(0, model.size() - 4) + ".ir";
  // The IR as lowered (later passes have their own tests in tests/analysis).
  std::ostringstream lowered;
  CompileOptions options;
  options.print_after = "ir";
  options.dump = &lowered;
  compile_model(model, options);
  const std::string actual = lowered.str();
  if (updating()) {
    std::ofstream(golden, std::ios::binary) << actual;
    GTEST_SKIP() << "rewrote " << golden;
  }
  ASSERT_TRUE(std::filesystem::exists(golden))
      << golden << " is missing; create it with ACROBAT_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, read_text(golden)) << "the IR of " << model << " changed; if that is intended, "
                                       << "regenerate with ACROBAT_UPDATE_GOLDEN=1 and review";
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenFile, ::testing::ValuesIn(files_in("tests/golden", ".acr")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

TEST(GoldenFiles, EveryIrHasItsModel) {
  auto models = files_in("tests/golden", ".acr");
  EXPECT_GE(models.size(), 4u);
  for (const auto& ir : files_in("tests/golden", ".ir")) {
    std::string model = ir.substr(0, ir.size() - 3) + ".acr";
    EXPECT_TRUE(std::filesystem::exists(model)) << ir << " has no model " << model;
  }
}

// The golden programs also run: their IR is not only well printed but means what it should.
TEST(GoldenFiles, IfAndOrComputesTheClassification) {
  auto m = compile_model(source_path("tests/golden/if_and_or.acr"), CompileOptions{});
  // classify(x, y) * 10 + classify(y - x, 1)
  auto out = run_json(m, {{1, 2}, {-1, 5}, {0, 0}, {3, -3}});
  EXPECT_EQ(out, nlohmann::json({10 + 1, -10 + 1, 0 + 0, -10 - 1}));
}

TEST(GoldenFiles, GenericPairSwapsAtEveryType) {
  auto m = compile_model(source_path("tests/golden/generic_pair.acr"), CompileOptions{});
  auto out = run_json(m, {nlohmann::json::parse(R"([[1.5, -2]])")});
  EXPECT_EQ(out[0][0], 2);
  EXPECT_EQ(out[0][1]["data"], nlohmann::json({3.0, -4.0}));
}

TEST(GoldenFiles, NestedLambdasSeeEveryCapture) {
  auto m = compile_model(source_path("tests/golden/nested_lambdas.acr"), CompileOptions{});
  // For each x: sum over y of (y * 10) + x per element = 10 * (1 + 2 + 3) + 3 * x.
  EXPECT_EQ(run_json(m, {{1, 2, 3}})[0], nlohmann::json({63, 66, 69}));
}

}  // namespace
}  // namespace acrobat::test
