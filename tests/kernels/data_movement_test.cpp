// Data movement kernels against element-by-element loops, with sentinels around the destination
// blocks to catch writes outside them.
#include <vector>

#include <gtest/gtest.h>

#include "acrobat/kernels.h"
#include "test_util.h"

namespace acrobat::kernels {
namespace {

using testing_util::random_floats;

constexpr float kSentinel = -777.0f;

TEST(DataMovement, Copy2dWithStrides) {
  struct Case {
    int64_t rows, cols, src_ld, dst_ld;
  };
  for (const Case& c : {Case{5, 7, 7, 7}, Case{5, 7, 11, 9}, Case{1, 3, 3, 100}, Case{4, 0, 2, 2},
                        Case{0, 4, 4, 4}}) {
    const auto src = random_floats(size_t(c.rows * c.src_ld), -1, 1, 1);
    std::vector<float> dst(size_t(c.rows * c.dst_ld), kSentinel);
    copy_2d(src.data(), c.src_ld, dst.data(), c.dst_ld, c.rows, c.cols);
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.dst_ld; ++j) {
        const float want = j < c.cols ? src[r * c.src_ld + j] : kSentinel;
        ASSERT_EQ(dst[r * c.dst_ld + j], want) << r << "," << j;
      }
    }
  }
}

TEST(DataMovement, GatherRows) {
  const int64_t rows = 10, row_len = 6;
  const auto table = random_floats(size_t(rows * row_len), -1, 1, 2);
  const std::vector<int64_t> index = {3, 0, 9, 3, 7};
  std::vector<float> out(index.size() * row_len + 1, kSentinel);
  gather_rows(table.data(), row_len, index.data(), int64_t(index.size()), out.data());
  for (size_t i = 0; i < index.size(); ++i) {
    for (int64_t j = 0; j < row_len; ++j) {
      ASSERT_EQ(out[i * row_len + j], table[index[i] * row_len + j]) << i << "," << j;
    }
  }
  EXPECT_EQ(out.back(), kSentinel);
}

TEST(DataMovement, Transpose) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {1, 9},
                            {9, 1},
                            {8, 8},
                            {32, 32},
                            {33, 65},
                            {512, 1280},
                            {100, 3},
                            {70, 130}}) {
    const auto x = random_floats(size_t(rows * cols), -1, 1, unsigned(rows * cols));
    std::vector<float> y(size_t(rows * cols) + 1, kSentinel);
    transpose_2d(x.data(), y.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(y[c * rows + r], x[r * cols + c])
            << rows << "x" << cols << " at " << r << "," << c;
      }
    }
    EXPECT_EQ(y.back(), kSentinel);
  }
}

TEST(DataMovement, TransposeWithStrides) {
  // A 37 x 70 block of a 40 x 75 matrix into a 70 x 37 block of rows 45 wide; the padding stays.
  const int64_t rows = 37, cols = 70, ldx = 75, ldy = 45;
  const auto x = random_floats(size_t(40 * ldx), -1, 1, 3);
  std::vector<float> y(size_t(cols * ldy), kSentinel);
  transpose_2d(x.data(), ldx, y.data(), ldy, rows, cols);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < ldy; ++r) {
      if (r < rows)
        ASSERT_EQ(y[c * ldy + r], x[r * ldx + c]) << r << "," << c;
      else
        ASSERT_EQ(y[c * ldy + r], kSentinel) << r << "," << c;
    }
  }
}

}  // namespace
}  // namespace acrobat::kernels
