// Size arithmetic cannot wrap: the checked helpers, element counts, the registry's concat rule and
// its FLOP counts at the edge of 64-bit integers.
#include <gtest/gtest.h>

#include "ops/ops.h"
#include "support/sizes.h"

namespace acrobat {
namespace {

TEST(Sizes, CheckedHelpersReportOverflow) {
  EXPECT_EQ(checked_mul<int64_t>(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checked_mul<int64_t>(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_EQ(checked_add<int64_t>(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checked_add<int64_t>(INT64_MAX, 1));
  EXPECT_EQ(checked_product<int64_t>(std::vector<int64_t>{}), 1);
  EXPECT_EQ(checked_product<int64_t>(std::vector<int64_t>{3, 5, 7}), 105);
  EXPECT_FALSE(checked_product<int64_t>(std::vector<int64_t>{1 << 30, 1 << 30, 1 << 30}));
  EXPECT_FALSE(checked_product<uint64_t>(std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 30}));
}

TEST(Sizes, ElementCountsSaturateInsteadOfWrapping) {
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({int64_t{1} << 32, int64_t{1} << 32}), INT64_MAX);
}

TEST(Sizes, ByteSizesForMessages) {
  EXPECT_EQ(byte_size_str(512), "512 bytes");
  EXPECT_EQ(byte_size_str(3 * 1024 * 1024 / 2), "1.5 MiB");
  EXPECT_EQ(byte_size_str(int64_t{91} << 30), "91.0 GiB");
  EXPECT_GT(physical_memory_bytes(), int64_t{1} << 20);
}

TEST(Sizes, ConcatOverflowIsAShapeError) {
  std::vector<std::vector<int64_t>> in = {{1, INT64_MAX - 1}, {1, 2}};
  OpAttrs attrs;
  attrs.ints = {-1};
  ShapeResult r = op_info(OpId::Concat).shape(in, attrs);
  EXPECT_FALSE(r.type);
  EXPECT_EQ(r.error, "concat along axis 1: the joined size overflows 64-bit integers");
}

TEST(Sizes, FlopCountsSaturate) {
  std::vector<std::vector<int64_t>> in = {{int64_t{1} << 31, int64_t{1} << 31},
                                          {int64_t{1} << 31, int64_t{1} << 31}};
  const OpInfo& mm = op_info(OpId::MatMul);
  EXPECT_EQ(mm.flops(in, {int64_t{1} << 31, int64_t{1} << 31}, {}), INT64_MAX);
  std::vector<std::vector<int64_t>> small = {{2, 3}, {3, 4}};
  EXPECT_EQ(mm.flops(small, {2, 4}, {}), 2 * 2 * 3 * 4);
  EXPECT_EQ(op_info(OpId::Softmax).flops(in, {int64_t{1} << 62, 4}, {}), INT64_MAX);
}

}  // namespace
}  // namespace acrobat
